"""What a consumer may hand out from a fetched partition: read_committed filtering of aborted data.

A fetch response at read_committed carries records below the last stable offset, plus the list of
aborted transactions (producer id, first offset) that overlap the fetched range. Walking the
batches in log order, Kafka consumers do this (the seeds describe it):

* before looking at a transactional batch, every aborted transaction whose first offset is at or
  below the batch's last offset is "open": its producer id goes into the set of aborted producers;
* a control batch (commit/abort marker) is never handed out; an ABORT marker of an aborted producer
  closes its aborted range (the producer id leaves the set, its later transactions are judged anew);
* a transactional data batch of a producer in the set is skipped whole;
* everything else is handed out, records below the fetch offset excepted (a batch may start before
  the offset we asked for).

The position still moves past skipped batches, so the consumer never re-reads them, and records
keep log order: nothing is buffered waiting for a marker. At read_uncommitted only control batches
are skipped.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, replace

from protocol.batch import BatchHeader, iter_batches
from protocol.control import parse_control_record
from protocol.records import decode_batch

from .structs import ConsumerRecord, TopicPartition


@dataclass(frozen=True, slots=True)
class FetchedBatches:
    """The data batches of one partition from one fetch response, still encoded: what the consumer
    may hand out, before any record is decoded.

    `batches` are (position in `buffer`, header) in log order, aborted data and markers already
    left out; records below `fetch_offset` (a batch may start before the offset asked for) are
    not part of it. A columnar reader (client/arrow.py) decodes them without a Python object per
    record; `records()` is the per-record decoding every other consumer uses.
    """

    tp: TopicPartition
    buffer: bytes
    batches: tuple[tuple[int, BatchHeader], ...]
    fetch_offset: int
    next_offset: int
    check_crc: bool = True

    def records(self) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        append = out.append
        topic, partition = self.tp
        fetch_offset = self.fetch_offset
        for pos, h in self.batches:
            _, recs = decode_batch(self.buffer, pos, check_crc=self.check_crc)
            ts_type = 1 if h.attributes & 0x08 else 0
            for r in recs:
                if r.offset >= fetch_offset:
                    append(ConsumerRecord(topic, partition, r.offset, r.timestamp, r.key, r.value, r.headers,
                                          ts_type))
        return out

    def starting_at(self, offset: int) -> FetchedBatches:
        """The rest of these batches from `offset` on (after some records were handed out)."""
        kept = tuple((pos, h) for pos, h in self.batches if h.base_offset + h.last_offset_delta >= offset)
        return replace(self, batches=kept, fetch_offset=max(offset, self.fetch_offset))


def select_batches(
    tp: TopicPartition, data: bytes | memoryview | None, fetch_offset: int,
    aborted: Iterable[tuple[int, int]] | None, *, read_committed: bool, check_crc: bool = True,
) -> tuple[FetchedBatches | None, int | None]:
    """The batches to hand out and the next fetch offset (None if `data` held no whole batch).

    `aborted` is the response's (producer_id, first_offset) list. Only control batches are decoded
    here (an ABORT marker ends its producer's aborted range); data batches stay encoded.
    """
    if not data:
        return None, None
    buf = bytes(data) if not isinstance(data, bytes) else data
    queue = sorted((first, pid) for pid, first in (aborted or ()))
    heapq.heapify(queue)
    aborted_pids: set[int] = set()
    kept: list[tuple[int, BatchHeader]] = []
    next_offset: int | None = None
    for pos, h in iter_batches(buf, strict=False):
        last = h.base_offset + h.last_offset_delta
        next_offset = last + 1
        if last < fetch_offset:
            continue
        if read_committed and h.producer_id >= 0:
            while queue and queue[0][0] <= last:
                aborted_pids.add(heapq.heappop(queue)[1])
            if h.is_control:
                if h.producer_id in aborted_pids:
                    _, recs = decode_batch(buf, pos, check_crc=check_crc)
                    if recs and parse_control_record(recs[0].key, recs[0].value).is_abort:
                        aborted_pids.discard(h.producer_id)
                continue
            if h.is_transactional and h.producer_id in aborted_pids:
                continue
        if h.is_control:
            continue
        kept.append((pos, h))
    if next_offset is None:
        return None, None
    return FetchedBatches(tp, buf, tuple(kept), fetch_offset, next_offset, check_crc), next_offset


def filter_fetched(
    tp: TopicPartition, data: bytes | memoryview | None, fetch_offset: int,
    aborted: Iterable[tuple[int, int]] | None, *, read_committed: bool, check_crc: bool = True,
) -> tuple[list[ConsumerRecord], int | None]:
    """Records to hand out and the next fetch offset (None if `data` held no whole batch)."""
    fetched, next_offset = select_batches(tp, data, fetch_offset, aborted, read_committed=read_committed,
                                          check_crc=check_crc)
    return (fetched.records() if fetched is not None else []), next_offset
