"""Who wrote each stored batch: the producer id, epoch and sequence of the data batches of a topic,
read from the brokers' segment files once the campaign is over.

A consumer never sees them, yet they decide whose fault a duplicate is. A broker deduplicates a
retried batch by (producer id, epoch, sequence); two copies under one producer epoch are a broker
that failed to, while copies under two epochs are a client that re-sent a batch after bumping its
epoch (KIP-360: librdkafka does so after a message timeout and then re-sends what may already be
stored), which no broker can recognise as a retry.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from protocol.batch import iter_batches


def segment_batches(partition_dir: Path) -> list[list[int]]:
    """[base offset, last offset, producer id, epoch, base sequence] of each idempotent or
    transactional data batch, in offset order (a torn tail is where the read stops)."""
    out: list[list[int]] = []
    for seg in sorted(partition_dir.glob("*.log")):
        for _, h in iter_batches(seg.read_bytes(), strict=False):
            if h.producer_id >= 0 and not h.is_control:
                out.append([h.base_offset, h.last_offset, h.producer_id, h.producer_epoch, h.base_sequence])
    return out


def batches_op(topic: str, replicas: Iterable[tuple[int, Path]]) -> dict[str, Any]:
    """The history line for `topic`: per partition, the batches of the replica holding the most
    (after healing the replicas agree up to the high watermark; the longest has the most)."""
    best: dict[int, tuple[int, list[list[int]]]] = {}
    for node, pdir in replicas:
        p = int(pdir.name.rsplit("-", 1)[1])
        got = segment_batches(pdir)
        if p not in best or (got[-1][1] if got else -1) > (best[p][1][-1][1] if best[p][1] else -1):
            best[p] = (node, got)
    return {"f": "batches", "topic": topic,
            "partitions": {str(p): {"node": node, "batches": got} for p, (node, got) in sorted(best.items())}}
