"""Background fetching: one Fetch in flight per leader, results buffered until the consumer takes them.

The fetcher keeps the next fetch ready while the application processes the previous records, which
is where a consumer's throughput comes from. A buffered result is only handed out if the
partition's position has not moved since the fetch was sent (a seek, a reset or a rebalance in
between makes it stale); filtering of aborted transactions happens here, when the response arrives
(isolation.py). Records are decoded when they are first handed out, so a consumer that takes the
batches whole (`take_batches`, for a columnar decoder) never pays for a record object.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ErrorCode, KafkaError
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic

from .cluster import Cluster
from .errors import KafkaClientError, RetriableError, error_from_code
from .isolation import FetchedBatches, select_batches
from .structs import ConsumerRecord, TopicPartition
from .subscription import EARLIEST, LATEST, PartitionState, SubscriptionState

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


@dataclass(slots=True)
class Completed:
    """Batches of one partition from one fetch; once decoded, its records are handed out from `index` on."""

    fetch_offset: int
    epoch: int
    batches: FetchedBatches
    next_offset: int
    records: list[ConsumerRecord] | None = None
    index: int = 0


@dataclass(slots=True)
class _Pending:
    error: KafkaClientError | None = None
    completed: dict[TopicPartition, Completed] = field(default_factory=dict)


class Fetcher:
    def __init__(self, cluster: Cluster, subs: SubscriptionState, *, read_committed: bool, max_wait_ms: int,
                 min_bytes: int, max_bytes: int, max_partition_bytes: int, check_crcs: bool = True) -> None:
        self._cluster = cluster
        self._subs = subs
        self.read_committed = read_committed
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.max_partition_bytes = max_partition_bytes
        self.check_crcs = check_crcs
        self.buffer: dict[TopicPartition, Completed] = {}
        self.errors: list[KafkaClientError] = []
        self.data_ready = asyncio.Event()
        self._wake = asyncio.Event()
        self._in_flight: set[int] = set()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._tasks: dict[asyncio.Task[Any], None] = {}
        self.position_resolver: Any = None  # async callable(list[TopicPartition]) set by the consumer

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    def wake(self) -> None:
        self._wake.set()

    async def close(self) -> None:
        self._closing = True
        tasks = [t for t in (self._task, *self._tasks) if t is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t
        self._task = None

    def discard(self, tps: set[TopicPartition] | None = None) -> None:
        """Drop buffered records (all, or of some partitions) after a seek or a rebalance."""
        if tps is None:
            self.buffer.clear()
        else:
            for tp in tps:
                self.buffer.pop(tp, None)

    # ------------------------------------------------------------------ handing out
    def _ready(self, only: set[TopicPartition] | None) -> Iterator[tuple[TopicPartition, Completed, PartitionState]]:
        """The buffered partitions that may be handed out now (asked for, still current, not
        paused), one at a time, so the caller may drop each from the buffer as it goes."""
        for tp in list(self.buffer):
            if only is not None and tp not in only:
                continue
            c = self.buffer[tp]
            s = self._subs.partitions.get(tp)
            if not self._current(tp, c, s):
                continue
            assert s is not None
            if not s.paused:
                yield tp, c, s

    def take(self, max_records: int, only: set[TopicPartition] | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        budget = max_records
        for tp, c, s in self._ready(only):
            if budget <= 0:
                break
            if c.records is None:
                try:
                    c.records = c.batches.records()
                except KafkaError as e:  # a batch that does not decode (CRC, truncation): the caller must know
                    del self.buffer[tp]
                    self.errors.append(error_from_code(e.code, e.message))
                    self.data_ready.set()
                    continue
                if not c.records:  # every record lay below the fetch offset
                    s.position = c.next_offset
                    del self.buffer[tp]
                    continue
            recs = c.records[c.index:c.index + budget]
            c.index += len(recs)
            budget -= len(recs)
            if recs:
                out[tp] = recs
            if c.index >= len(c.records):
                s.position = c.next_offset
                del self.buffer[tp]
            else:
                s.position = c.records[c.index].offset
        if not self.buffer and not self.errors:
            self.data_ready.clear()
        self._wake.set()
        return out

    def take_batches(self, only: set[TopicPartition] | None = None) -> dict[TopicPartition, FetchedBatches]:
        """Everything buffered, per partition, as the still-encoded batches of one fetch each; the
        position moves past them."""
        out: dict[TopicPartition, FetchedBatches] = {}
        for tp, c, s in self._ready(only):
            if c.records is None or c.index == 0:
                out[tp] = c.batches
            elif c.index < len(c.records):  # records were handed out one by one before
                out[tp] = c.batches.starting_at(c.records[c.index].offset)
            s.position = c.next_offset
            del self.buffer[tp]
        if not self.buffer and not self.errors:
            self.data_ready.clear()
        self._wake.set()
        return out

    def _current(self, tp: TopicPartition, c: Completed, s: Any) -> bool:
        """Is `c` still what the partition reads next? Drops it if not: the partition was sought,
        reset or reassigned since the fetch."""
        expected = c.records[c.index].offset if c.records is not None and c.index else c.fetch_offset
        if s is None or s.epoch != c.epoch or s.position != expected:
            del self.buffer[tp]
            return False
        return True

    # ------------------------------------------------------------------ fetching
    async def _loop(self) -> None:
        # the flag, not only the cancellation, ends the loop: Python 3.11's wait_for can swallow a
        # cancel that arrives just as the awaited event fires
        while not self._closing:
            try:
                await self._fetch_round()
            except (RetriableError, OSError, TimeoutError):
                await asyncio.sleep(self._cluster.retry_backoff)
            except KafkaClientError as e:
                self.errors.append(e)
                self.data_ready.set()
                await asyncio.sleep(self._cluster.retry_backoff)
            self._wake.clear()
            try:
                async with asyncio.timeout(1.0):  # 3.11's wait_for would add a loop turn to each wake
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _fetch_round(self) -> None:
        missing = self._subs.needing_position()
        if missing and self.position_resolver is not None:
            await self.position_resolver(missing)
        by_node: dict[int, list[TopicPartition]] = defaultdict(list)
        held: set[int] = set()  # nodes some of whose fetchable partitions still hold records
        unknown = False
        for tp in self._subs.fetchable():
            leader = self._cluster.leader_for(tp)
            if leader is None:
                unknown = True
                continue
            if tp in self.buffer:
                held.add(leader)
            else:
                by_node[leader].append(tp)
        if unknown:
            await self._cluster.refresh_metadata({tp.topic for tp in self._subs.partitions})
        for node, tps in by_node.items():
            # Not while the application has yet to take some of this node's records: the fetch
            # would name only the partitions taken so far, and if they have nothing new it
            # parks at the broker for max_wait_ms, holding the node (one fetch in flight each)
            # while the rest is taken and could be fetched again (docs/client.md).
            if node in self._in_flight or node in held:
                continue
            self._in_flight.add(node)
            t = asyncio.get_running_loop().create_task(self._fetch(node, tps))
            self._tasks[t] = None
            t.add_done_callback(lambda done: self._tasks.pop(done, None))

    async def _fetch(self, node: int, tps: list[TopicPartition]) -> None:
        try:
            await self._fetch_from(node, tps)
        except (RetriableError, OSError, TimeoutError):
            with contextlib.suppress(KafkaClientError):
                await self._cluster.refresh_metadata()
            await asyncio.sleep(self._cluster.retry_backoff)
        except KafkaClientError as e:
            self.errors.append(e)
            self.data_ready.set()
        except KafkaError as e:  # a batch that does not decode (CRC, truncation): the caller must know
            self.errors.append(error_from_code(e.code, e.message))
            self.data_ready.set()
        finally:
            self._in_flight.discard(node)
            self._wake.set()

    async def _fetch_from(self, node: int, tps: list[TopicPartition]) -> None:
        sent: dict[TopicPartition, tuple[int, int]] = {}
        by_topic: dict[str, list[FetchPartition]] = defaultdict(list)
        for tp in tps:
            s = self._subs.partitions.get(tp)
            if s is None or s.position is None:
                continue
            sent[tp] = (s.position, s.epoch)
            by_topic[tp.topic].append(FetchPartition(partition=tp.partition, fetch_offset=s.position,
                                                     partition_max_bytes=max(s.max_bytes, self.max_partition_bytes)))
        if not sent:
            return
        req = FetchRequest(max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes, max_bytes=self.max_bytes,
                           isolation_level=1 if self.read_committed else 0,
                           topics=[FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
        conn = await self._cluster.connection(node)
        resp: FetchResponse = await conn.request(req, timeout=self._cluster.request_timeout + self.max_wait_ms / 1000)
        if resp.error_code:
            raise error_from_code(resp.error_code, "Fetch")
        refresh = False
        for t in resp.responses:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition_index)
                if tp not in sent:
                    continue
                offset, epoch = sent[tp]
                s = self._subs.partitions.get(tp)
                if s is None or s.epoch != epoch or s.position != offset:
                    continue  # moved by a seek or a rebalance while the fetch was out
                code = p.error_code
                if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    if self._subs.auto_offset_reset in (EARLIEST, LATEST):
                        self._subs.request_reset(tp, self._subs.auto_offset_reset)
                    else:
                        self.errors.append(error_from_code(code, f"{tp} offset {offset}"))
                        self.data_ready.set()
                    continue
                if code:
                    if ErrorCode(code).retriable:
                        refresh = True
                    else:
                        self.errors.append(error_from_code(code, f"fetch {tp}"))
                        self.data_ready.set()
                    continue
                s.high_watermark = p.high_watermark
                s.last_stable_offset = p.last_stable_offset
                aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions or ()]
                fetched, next_offset = select_batches(tp, p.records, offset, aborted,
                                                      read_committed=self.read_committed, check_crc=self.check_crcs)
                if fetched is None or next_offset is None:
                    if p.records and len(p.records):
                        s.max_bytes = min(s.max_bytes * 2, 64 * 1024 * 1024)  # one batch bigger than asked
                    continue
                s.max_bytes = self.max_partition_bytes
                if not fetched.batches:
                    s.position = next_offset  # only markers / aborted data: step over them
                    continue
                self.buffer[tp] = Completed(offset, epoch, fetched, next_offset)
                self.data_ready.set()
        if refresh:
            await self._cluster.refresh_metadata()

    # ------------------------------------------------------------------ offsets by time
    async def list_offsets(self, tps: list[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        """Offsets of `tps` at `timestamp` (-2 earliest, -1 latest: the LSO at read_committed)."""
        return await self._cluster.list_offsets(tps, timestamp, read_committed=self.read_committed)
