"""What compaction keeps of one batch, and how a batch is rewritten with fewer records.

Kept apart from the cleaner's file handling (storage/cleaner.py) so the rules can be read in one
place. The rules, per batch, in log order:

* Data of an aborted transaction is dropped (which transactions aborted comes from the
  segments' .txnindex entries).
* Any other record is kept if it has no key (Kafka refuses keyless records on compacted topics
  at produce time; we accept them and the cleaner never removes them, so nothing accepted is
  silently lost) or if no later record with its key exists below the last stable offset.
* A kept tombstone (null value) is dropped once the batch's delete horizon has passed. The
  horizon is stamped into the batch the first time a cleaning pass finds it holding a tombstone:
  the DELETE_HORIZON flag is set and the base timestamp becomes now + delete_retention_ms, with
  record timestamp deltas recomputed so every record keeps its timestamp (Kafka's KIP-534). So
  the retention is measured from when the cleaner first kept the tombstone, not from the record
  timestamp, which a producer sets and may set far in the past; and it survives restarts
  without any state of ours.
* A transaction marker (control batch) can go once no record of its transaction is left
  below it and, like a tombstone, its delete horizon has passed. The horizon is stamped in the
  pass that finds the transaction empty (its data may go in that same pass), so the marker
  always outlives its data by at least one pass and delete_retention_ms: a read_committed
  consumer part-way through the transaction still meets the marker, and the data is gone for
  good before the marker is. An abort marker keeps its .txnindex entry as long as it stays.
* A batch left with no records is dropped, except the last batch in the log of each producer
  id that producer state still knows: its header stays, empty, so that rebuilding producer state
  from the log (no usable snapshot) still finds the producer's epoch and last sequence, as in
  Kafka. Snapshots alone would not do: a snapshot older than a compacted range is still replayed
  over it when newer snapshots are lost.

A rewritten batch keeps everything in its header but the record count and CRC (and the base
timestamp when the horizon is stamped): the base offset and last offset delta stay, so its
offset range and sequence range are unchanged and the remaining records keep their offsets,
leaving gaps. Compression is kept with the same codec; an empty batch is written uncompressed,
as Kafka does. max_timestamp stays as written (the time index and retention read it).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from protocol.batch import (
    ATTR_OFFSET,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    compute_crc,
    read_header,
)
from protocol.control import parse_control_record
from protocol.errors import KafkaError
from protocol.records import DecodedRecord, Record, build_batch, decode_batch

from .txn_index import AbortedTxn

_ATTRIBUTES = struct.Struct(">h")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23
_MAX_TIMESTAMP = struct.Struct(">q")
_MAX_TIMESTAMP_AT = 35
_CRC = struct.Struct(">I")


def delete_horizon(h: BatchHeader) -> int | None:
    """The batch's delete horizon (ms), if a cleaning pass stamped one."""
    return h.base_timestamp if h.attributes & DELETE_HORIZON_FLAG else None


def rebuild_batch(h: BatchHeader, records: Sequence[DecodedRecord], horizon: int | None) -> bytes:
    """The batch `h` holding only `records`, with its header otherwise unchanged."""
    base_ts = horizon if horizon is not None else h.base_timestamp
    batch = bytearray(build_batch(
        (Record(r.offset - h.base_offset, r.timestamp - base_ts, r.key, r.value, r.headers) for r in records),
        base_offset=h.base_offset, base_timestamp=base_ts, producer_id=h.producer_id,
        producer_epoch=h.producer_epoch, base_sequence=h.base_sequence, transactional=h.is_transactional,
        control=h.is_control, compression=h.compression if records else 0,
        partition_leader_epoch=h.partition_leader_epoch,
        timestamp_type=1 if h.attributes & TIMESTAMP_TYPE_MASK else 0,
    ))
    attributes = _ATTRIBUTES.unpack_from(batch, ATTR_OFFSET)[0]
    if horizon is not None:
        attributes |= DELETE_HORIZON_FLAG
    _ATTRIBUTES.pack_into(batch, ATTR_OFFSET, attributes)
    _LAST_OFFSET_DELTA.pack_into(batch, _LAST_OFFSET_DELTA_AT, h.last_offset_delta)
    _MAX_TIMESTAMP.pack_into(batch, _MAX_TIMESTAMP_AT, h.max_timestamp)
    _CRC.pack_into(batch, CRC_OFFSET, compute_crc(batch, 0, len(batch)))
    return bytes(batch)


class TxnTracker:
    """Which transaction each transactional batch belongs to, walking the log in order.

    Fed the aborted transactions of the partition (from .txnindex); a transactional batch of a
    producer lies in an aborted transaction if one of them spans its offset, otherwise in a
    committed one (everything cleaned is below the LSO, so decided).
    """

    def __init__(self, aborted: Sequence[AbortedTxn]) -> None:
        self._aborted = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self._open: dict[int, AbortedTxn] = {}  # producer id -> aborted txn it may be inside
        self._kept: set[int] = set()  # producers whose current transaction still has records kept

    def advance(self, offset: int) -> None:
        """Take in the aborted transactions that start at or before `offset`."""
        while self._next < len(self._aborted) and self._aborted[self._next].first_offset <= offset:
            txn = self._aborted[self._next]
            self._open[txn.producer_id] = txn
            self._next += 1

    def data_is_aborted(self, producer_id: int, offset: int) -> bool:
        """Whether the transactional batch at `offset` was aborted."""
        txn = self._open.get(producer_id)
        return txn is not None and txn.first_offset <= offset < txn.last_offset

    def kept_data(self, producer_id: int) -> None:
        """A batch of the producer's current transaction keeps records in this pass."""
        self._kept.add(producer_id)

    def end_txn(self, producer_id: int, offset: int, *, abort: bool) -> tuple[bool, AbortedTxn | None]:
        """A marker at `offset`: (no record of its transaction is left, its .txnindex entry)."""
        txn = self._open.pop(producer_id, None) if abort else None
        if txn is not None and txn.last_offset != offset:
            txn = None
        kept = producer_id in self._kept
        self._kept.discard(producer_id)
        return not kept, txn


class Outcome(NamedTuple):
    """What to write for one batch; data None = drop the batch entirely."""

    data: bytes | None
    verbatim: bool  # data is the original batch, unchanged
    removed_records: int
    removed_tombstones: int
    aborted_records: int
    marker_removed: bool
    pending_horizon: int | None  # a horizon after which this batch can lose more
    txn_entry: AbortedTxn | None  # the abort this kept marker ends, for the new .txnindex


class BatchFilter:
    """Applies the rules above to one batch at a time, in log order."""

    def __init__(self, latest: Mapping[bytes, int], tracker: TxnTracker, last_batch_of: Mapping[int, int],
                 now_ms: int, delete_retention_ms: int) -> None:
        self._latest = latest
        self._tracker = tracker
        self._last_batch_of = last_batch_of  # live producer id -> base offset of its last batch
        self._now = now_ms
        self._new_horizon = now_ms + delete_retention_ms

    def filter(self, buf: bytes, pos: int, h: BatchHeader) -> Outcome:
        original = buf[pos:pos + h.size]
        self._tracker.advance(h.last_offset)
        keep_header = h.producer_id >= 0 and self._last_batch_of.get(h.producer_id) == h.base_offset
        if h.is_control:
            return self._control(buf, pos, h, original, keep_header)
        if h.is_transactional and self._tracker.data_is_aborted(h.producer_id, h.base_offset):
            return self._emptied(h, original, keep_header, 0, 0, h.records_count)
        out = self._data(buf, pos, h, original, keep_header)
        if h.is_transactional and out.data is not None and read_header(out.data).records_count:
            self._tracker.kept_data(h.producer_id)
        return out

    def _data(self, buf: bytes, pos: int, h: BatchHeader, original: bytes, keep_header: bool) -> Outcome:
        try:
            _, records = decode_batch(buf, pos)
        except KafkaError:
            # Unreadable: keep it as it is (its keys are not in the map either, so nothing is
            # removed on its account).
            return Outcome(original, True, 0, 0, 0, False, None, None)
        horizon = delete_horizon(h)
        expired = horizon is not None and horizon <= self._now
        kept: list[DecodedRecord] = []
        tombstones = removed_tombstones = 0
        latest = self._latest
        for r in records:
            if r.key is not None and latest.get(r.key, -1) > r.offset:
                continue
            if r.value is None and r.key is not None:
                if expired:
                    removed_tombstones += 1
                    continue
                tombstones += 1
            kept.append(r)
        removed = len(records) - len(kept) - removed_tombstones
        if not kept:
            return self._emptied(h, original, keep_header, removed, removed_tombstones, 0)
        if tombstones and horizon is None:
            return Outcome(rebuild_batch(h, kept, self._new_horizon), False, removed, removed_tombstones, 0,
                           False, self._new_horizon, None)
        pending = horizon if tombstones else None
        if not removed:
            return Outcome(original, True, 0, 0, 0, False, pending, None)
        return Outcome(rebuild_batch(h, kept, horizon), False, removed, removed_tombstones, 0, False, pending,
                       None)

    def _emptied(self, h: BatchHeader, original: bytes, keep_header: bool, removed: int, tombstones: int,
                 aborted: int) -> Outcome:
        if not keep_header:
            return Outcome(None, False, removed, tombstones, aborted, h.is_control and h.records_count > 0,
                           None, None)
        if h.records_count == 0:
            return Outcome(original, True, 0, 0, 0, False, None, None)
        return Outcome(rebuild_batch(h, (), delete_horizon(h)), False, removed, tombstones, aborted,
                       h.is_control, None, None)

    def _control(self, buf: bytes, pos: int, h: BatchHeader, original: bytes, keep_header: bool) -> Outcome:
        if h.records_count == 0:
            return self._emptied(h, original, keep_header, 0, 0, 0)  # emptied by an earlier pass
        entry: AbortedTxn | None = None
        try:
            _, records = decode_batch(buf, pos)
            marker = parse_control_record(records[0].key, records[0].value) if records else None
        except KafkaError:
            return Outcome(original, True, 0, 0, 0, False, None, None)
        if marker is None or not marker.is_transaction_marker:
            return Outcome(original, True, 0, 0, 0, False, None, None)
        removable, entry = self._tracker.end_txn(h.producer_id, h.base_offset, abort=marker.is_abort)
        if not removable:
            return Outcome(original, True, 0, 0, 0, False, None, entry)
        horizon = delete_horizon(h)
        if horizon is not None and horizon <= self._now:
            return self._emptied(h, original, keep_header, 0, 0, 0)
        if horizon is not None:
            return Outcome(original, True, 0, 0, 0, False, horizon, entry)
        return Outcome(rebuild_batch(h, records, self._new_horizon), False, 0, 0, 0, False, self._new_horizon,
                       entry)
