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

from protocol.batch import iter_batches
from protocol.control import parse_control_record
from protocol.records import decode_batch

from .structs import ConsumerRecord, TopicPartition


def filter_fetched(
    tp: TopicPartition, data: bytes | memoryview | None, fetch_offset: int,
    aborted: Iterable[tuple[int, int]] | None, *, read_committed: bool, check_crc: bool = True,
) -> tuple[list[ConsumerRecord], int | None]:
    """Records to hand out and the next fetch offset (None if `data` held no whole batch).

    `aborted` is the response's (producer_id, first_offset) list.
    """
    if not data:
        return [], None
    buf = bytes(data) if not isinstance(data, bytes) else data
    queue = sorted((first, pid) for pid, first in (aborted or ()))
    heapq.heapify(queue)
    aborted_pids: set[int] = set()
    out: list[ConsumerRecord] = []
    append = out.append
    next_offset: int | None = None
    topic, partition = tp
    for pos, h in iter_batches(buf, strict=False):
        last = h.base_offset + h.last_offset_delta
        if last < fetch_offset:
            next_offset = last + 1
            continue
        if read_committed and h.producer_id >= 0:
            while queue and queue[0][0] <= last:
                aborted_pids.add(heapq.heappop(queue)[1])
            if h.is_control:
                _, recs = decode_batch(buf, pos, check_crc=check_crc)
                if recs and h.producer_id in aborted_pids:
                    ctrl = parse_control_record(recs[0].key, recs[0].value)
                    if ctrl.is_abort:
                        aborted_pids.discard(h.producer_id)
                next_offset = last + 1
                continue
            if h.is_transactional and h.producer_id in aborted_pids:
                next_offset = last + 1
                continue
        if h.is_control:
            next_offset = last + 1
            continue
        _, recs = decode_batch(buf, pos, check_crc=check_crc)
        ts_type = 1 if h.attributes & 0x08 else 0
        for r in recs:
            if r.offset >= fetch_offset:
                append(ConsumerRecord(topic, partition, r.offset, r.timestamp, r.key, r.value, r.headers, ts_type))
        next_offset = last + 1
    return out, next_offset
