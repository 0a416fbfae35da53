"""What a read_committed reader of a batch-atomic sink's topic could see at every moment, and the
verdict on it: no micro-batch ever partly visible, every input record once in the output.

A read_committed reader of a partition reads exactly the committed records below the partition's
last stable offset (LSO), so sampling the LSO as often as possible records every state such a
reader can be in. `LsoWatcher` does that on a thread of its own while the query runs (and while its
drivers are killed and restarted). Afterwards, `AtomicVerdict` maps every output record to its
micro-batch (the jobs here write each input record's position, `partition:offset`, as the value,
and Spark's offset log says which input range each batch covered) and checks every sampled LSO:
a batch's records in a partition must lie all below it or all at or above it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pipeline_support import checkpoint_batches, read_committed

from client import Consumer, ConsumerRecord, KafkaClientError, TopicPartition

ALLOW_2PC = {"KETCH_TRANSACTION_TWO_PHASE_COMMIT_ENABLE": "true"}
GATE_HEADER = "ketch-gate"


class LsoWatcher:
    """Samples the last stable offset of each partition of `topic` every few milliseconds until
    stopped; keeps every distinct value seen (they only grow)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.bootstrap = bootstrap
        self.seen: dict[int, set[int]] = {tp.partition: set() for tp in self.tps}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), name="lso-watcher", daemon=True)

    def start(self) -> LsoWatcher:
        self._thread.start()
        return self

    def stop(self) -> dict[int, set[int]]:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the LSO watcher did not stop"
        return self.seen

    async def _run(self) -> None:
        while not self._stop.is_set():
            try:
                async with Consumer(self.bootstrap, isolation_level="read_committed", enable_auto_commit=False,
                                    request_timeout_ms=5000) as c:
                    while not self._stop.is_set():
                        for tp, lso in (await c.end_offsets(self.tps)).items():
                            self.seen[tp.partition].add(lso)
                        self.samples += 1
                        await asyncio.sleep(0.005)  # the sampling rate: leave the 2 cores to Spark and the broker
            except (KafkaClientError, OSError, TimeoutError):
                await asyncio.sleep(0.2)  # a broker restarting (the soak): sample again once it is back


def position(r: ConsumerRecord) -> str:
    """What the jobs here write for an input record: where it was read from."""
    return f"{r.partition}:{r.offset}"


@dataclass
class AtomicVerdict:
    """The output of a query that copied `src`'s positions to `out`, judged against its checkpoint."""

    bootstrap: str
    src: str
    out: str
    checkpoint: Path
    context: str = ""
    output: list[ConsumerRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.output = asyncio.run(read_committed(self.bootstrap, self.out))
        self.source = asyncio.run(read_committed(self.bootstrap, self.src))
        self.batches = checkpoint_batches(self.checkpoint)
        # input partition -> [(end offset, batch)], in batch order
        self._ends: dict[int, list[tuple[int, int]]] = {}
        for batch in sorted(self.batches):
            for p, end in self.batches[batch][self.src].items():
                self._ends.setdefault(int(p), []).append((end, batch))

    def batch_of(self, value: bytes) -> int:
        p, offset = (int(x) for x in value.decode().split(":"))
        for end, batch in self._ends[p]:
            if offset < end:
                return batch
        raise AssertionError(f"{self.context}: output {value!r} lies beyond every committed batch")

    def check_exactly_once(self) -> None:
        got = Counter(r.value for r in self.output)
        want = Counter(position(r).encode() for r in self.source)
        dupes = {v: n for v, n in got.items() if n > 1}
        assert got == want, (f"{self.context}: {len(dupes)} duplicated, {len(set(want) - set(got))} missing, "
                             f"{len(set(got) - set(want))} unexpected output records")

    def spans(self) -> dict[int, dict[int, tuple[int, int]]]:
        """Output partition -> batch -> (first offset, last offset) of the batch's records there."""
        out: dict[int, dict[int, tuple[int, int]]] = {}
        for r in self.output:
            b = self.batch_of(r.value)
            lo, hi = out.setdefault(r.partition, {}).get(b, (r.offset, r.offset))
            out[r.partition][b] = (min(lo, r.offset), max(hi, r.offset))
        return out

    def partial_views(self, seen: dict[int, set[int]]) -> list[str]:
        """Every sampled LSO that cut a batch in two: its reader saw part of that batch."""
        bad = []
        for p, by_batch in self.spans().items():
            for lso in sorted(seen[p]):
                for b, (lo, hi) in by_batch.items():
                    if lo < lso <= hi:
                        visible = sum(1 for r in self.output
                                      if r.partition == p and r.offset < lso and self.batch_of(r.value) == b)
                        total = sum(1 for r in self.output if r.partition == p and self.batch_of(r.value) == b)
                        bad.append(f"partition {p}: LSO {lso} showed {visible} of batch {b}'s {total} records")
        return bad

    def check_batches_whole(self, seen: dict[int, set[int]]) -> None:
        bad = self.partial_views(seen)
        assert not bad, f"{self.context}: a read_committed reader saw part of a micro-batch:\n" + "\n".join(bad[:20])
        moves = min(len(v) for v in seen.values())
        assert moves >= min(len(self.batches), 3), (
            f"{self.context}: the LSO was seen at only {moves} values over {len(self.batches)} batches: "
            "the reader did not watch the query as it ran")


async def gate_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, list[int]]:
    """Offsets of the sink's gate records (aborted, so only a read_uncommitted reader sees them)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    out: dict[int, list[int]] = {p: [] for p in range(partitions)}
    async with Consumer(bootstrap, isolation_level="read_uncommitted", auto_offset_reset="earliest",
                        enable_auto_commit=False) as c:
        c.assign(tps)
        end = await c.end_offsets(tps)
        while [tp for tp in tps if await c.position(tp) < end[tp]]:
            for recs in (await c.getmany(timeout_ms=200)).values():
                for r in recs:
                    if any(k == GATE_HEADER for k, _ in r.headers):
                        out[r.partition].append(r.offset)
    return out
