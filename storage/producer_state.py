"""Idempotent and transactional producer state of one partition.

Per producer id we keep what Kafka keeps: the epoch, the sequence ranges and offsets of the last
five batches (a retry of any of them is answered with the original offsets instead of being
written twice), the first offset of the producer's open transaction (which holds the last stable
offset back), the coordinator epoch of the last marker (to fence a zombie coordinator) and the
timestamp of the last write (for expiry).

Validation rules (client appends; replicated and replayed batches are applied without checks,
because the leader already checked them and the log is the truth):

* epoch below the current one                 -> INVALID_PRODUCER_EPOCH (what Kafka >= 2.7 answers
  on produce; the client aborts and retries instead of treating it as fatal like PRODUCER_FENCED)
* a new (higher) epoch must start at sequence 0 -> OUT_OF_ORDER_SEQUENCE_NUMBER
* same epoch: first sequence must be last + 1 (wrapping after 2^31-1 to 0), else
  OUT_OF_ORDER_SEQUENCE_NUMBER — unless the batch repeats one of the last five, then it is a
  `Duplicate` carrying the original offsets
* an unknown producer id is accepted at any sequence and tracked from there. Brokers since
  Kafka 2.5 (KIP-360) no longer answer UNKNOWN_PRODUCER_ID here: the state of an idle producer is
  expired after producer_id_expiration_ms or lost with retention, and a producer coming back
  after that cannot have a gap we could detect. Java clients >= 2.5 and librdkafka >= 1.4 expect
  exactly this; answering UNKNOWN_PRODUCER_ID would make librdkafka bump the epoch (or fail the
  producer when it is transactional) for no gain.
* a non-transactional batch while the producer has an open transaction -> INVALID_TXN_STATE
* markers: epoch below current -> INVALID_PRODUCER_EPOCH; coordinator epoch below the last seen
  -> TRANSACTION_COORDINATOR_FENCED. A marker ends the open transaction, if any (a marker for a
  transaction that wrote nothing here completes nothing).

Batches without a sequence (base_sequence -1: the broker's own transactional writes, such as
TxnOffsetCommit into __consumer_offsets) are checked for epoch only and are not remembered for
deduplication.

Changes of one append are staged in a `ProducerStateUpdate`, so a batch failing validation
leaves no trace (the append is all-or-nothing) and the manager changes only after the write.
"""

from __future__ import annotations

import re
import struct
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

import crc32c
import structlog

from protocol.batch import BatchHeader
from protocol.control import ControlRecord
from protocol.errors import ErrorCode, KafkaError

from .checkpoint import atomic_write
from .faults import broken
from .fs import FileSystem

log = structlog.get_logger(__name__)

NUM_BATCHES_TO_RETAIN = 5
NO_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 0x7FFFFFFF

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")
_SNAP_HEADER = struct.Struct(">hIqi")  # version, crc32c(rest), offset, producer count
_SNAP_ENTRY = struct.Struct(">qhiqqqb")  # pid, epoch, coord epoch, last ts, last update, txn first, n
_SNAP_BATCH = struct.Struct(">iiqqq")  # first seq, last seq, first offset, last offset, timestamp


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def write_snapshot(fs: FileSystem, directory: Path, offset: int, data: bytes, *, durable: bool) -> Path:
    """Write an encoded snapshot (ProducerStateManager.encode_snapshot) as of `offset`."""
    path = snapshot_path(directory, offset)
    atomic_write(fs, path, data, durable=durable)
    return path


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    current_txn_first_offset: int | None = None
    coordinator_epoch: int = -1
    last_timestamp: int = -1  # max timestamp of the producer's last batch (DescribeProducers shows it)
    last_update_ms: int = -1  # broker clock at the producer's last write: what expiry measures

    def copy(self) -> ProducerEntry:
        return ProducerEntry(self.producer_id, self.epoch, deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
                             self.current_txn_first_offset, self.coordinator_epoch, self.last_timestamp,
                             self.last_update_ms)

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def _set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_abort: bool


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A retried batch already in the log: answer with these offsets and write nothing."""

    first_offset: int
    last_offset: int
    timestamp: int


class ProducerStateUpdate:
    """The producer-state effect of one append, not yet visible to anyone."""

    def __init__(self, manager: ProducerStateManager, validate: bool, now_ms: int) -> None:
        self._manager = manager
        self.validate = validate
        self.now_ms = now_ms
        self.entries: dict[int, ProducerEntry] = {}
        self.completed: list[CompletedTxn] = []

    def _entry(self, pid: int) -> ProducerEntry:
        e = self.entries.get(pid)
        if e is None:
            current = self._manager.producers.get(pid)
            e = current.copy() if current is not None else ProducerEntry(pid)
            self.entries[pid] = e
        return e

    def find_duplicate(self, h: BatchHeader) -> Duplicate | None:
        """A batch equal in epoch and sequence range to one of the producer's last five."""
        if h.base_sequence < 0 or broken("dedup"):
            return None
        current = self._manager.producers.get(h.producer_id)
        if current is None:
            return None
        b = current.find_duplicate(h.producer_epoch, h.base_sequence, h.last_sequence)
        return None if b is None else Duplicate(b.first_offset, b.last_offset, b.timestamp)

    def append_data(self, h: BatchHeader, first_offset: int, last_offset: int) -> None:
        e = self._entry(h.producer_id)
        epoch = h.producer_epoch
        if self.validate:
            if epoch < e.epoch and not broken("fence"):
                raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                 f"producer {h.producer_id} epoch {epoch} is older than {e.epoch}")
            if h.base_sequence >= 0:
                if epoch != e.epoch:
                    if h.base_sequence != 0 and e.epoch != NO_EPOCH:
                        raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                         f"producer {h.producer_id} new epoch {epoch} starts at sequence "
                                         f"{h.base_sequence}, not 0")
                elif not in_sequence(e.last_seq, h.base_sequence) and not broken("dedup"):
                    raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                     f"producer {h.producer_id} sequence {h.base_sequence} after {e.last_seq}")
            if not h.is_transactional and e.current_txn_first_offset is not None:
                raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                                 f"producer {h.producer_id} wrote a non-transactional batch inside a transaction")
        e._set_epoch(epoch)
        if h.base_sequence >= 0:
            e.batches.append(BatchMetadata(h.base_sequence, h.last_sequence, first_offset, last_offset,
                                           h.max_timestamp))
        e.last_timestamp = h.max_timestamp
        e.last_update_ms = self.now_ms
        if h.is_transactional and e.current_txn_first_offset is None:
            e.current_txn_first_offset = first_offset

    def append_marker(self, h: BatchHeader, marker: ControlRecord | None, offset: int) -> CompletedTxn | None:
        if marker is None:
            return None
        e = self._entry(h.producer_id)
        if self.validate:
            if h.producer_epoch < e.epoch:
                raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                 f"marker for producer {h.producer_id} has epoch {h.producer_epoch} < {e.epoch}")
            if marker.coordinator_epoch < e.coordinator_epoch:
                raise KafkaError(ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                                 f"marker coordinator epoch {marker.coordinator_epoch} < {e.coordinator_epoch}")
        completed = None
        if e.current_txn_first_offset is not None:
            completed = CompletedTxn(h.producer_id, e.current_txn_first_offset, offset, marker.is_abort)
            self.completed.append(completed)
        e._set_epoch(h.producer_epoch)
        e.coordinator_epoch = marker.coordinator_epoch
        e.current_txn_first_offset = None
        e.last_timestamp = h.max_timestamp
        e.last_update_ms = self.now_ms
        return completed


class ProducerStateManager:
    """Producer entries of one partition, the open transactions, and their snapshots on disk."""

    def __init__(self, fs: FileSystem, directory: Path, expiration_ms: int) -> None:
        self.fs = fs
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerEntry] = {}
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        # Completed transactions whose marker is not yet below the high watermark: until it is,
        # the transaction may still be undone by a leader change, so it keeps the LSO back.
        self._unreplicated: list[CompletedTxn] = []
        self.map_end_offset = 0  # the state reflects every batch below this offset

    # -- reading -------------------------------------------------------------------------------
    @property
    def active_producers(self) -> Mapping[int, ProducerEntry]:
        """Read-only view (for DescribeProducers); do not mutate the entries."""
        return MappingProxyType(self.producers)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    @property
    def ongoing_transactions(self) -> Mapping[int, int]:
        """producer id -> first offset of its open transaction."""
        return MappingProxyType(self._ongoing)

    def first_unstable_offset(self) -> int | None:
        if not self._ongoing and not self._unreplicated:
            return None  # most partitions, most of the time: asked on every fetch of each
        firsts = list(self._ongoing.values())
        firsts.extend(t.first_offset for t in self._unreplicated)
        return min(firsts)

    def lso_after(self, txn: CompletedTxn) -> int:
        """The LSO right after `txn` completed (what the .txnindex records with it)."""
        others = [first for pid, first in self._ongoing.items() if pid != txn.producer_id]
        return min(others) if others else txn.last_offset + 1

    # -- changing ------------------------------------------------------------------------------
    def begin(self, *, validate: bool, now_ms: int) -> ProducerStateUpdate:
        return ProducerStateUpdate(self, validate, now_ms)

    def commit(self, update: ProducerStateUpdate, end_offset: int, high_watermark: int | None = None) -> None:
        for pid, e in update.entries.items():
            self.producers[pid] = e
            if e.current_txn_first_offset is None:
                self._ongoing.pop(pid, None)
            else:
                self._ongoing[pid] = e.current_txn_first_offset
        for txn in update.completed:
            if high_watermark is None or txn.last_offset >= high_watermark:
                self._unreplicated.append(txn)
        self.map_end_offset = end_offset

    def on_high_watermark(self, high_watermark: int) -> None:
        if self._unreplicated:
            self._unreplicated = [t for t in self._unreplicated if t.last_offset >= high_watermark]

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for expiration_ms that have no open transaction.

        Idle is measured on the broker's clock, not by record timestamps as Kafka does: a
        producer writing records with old CreateTime timestamps (a backfill) must not lose its
        deduplication state on the next expiry check.
        """
        limit = now_ms - self.expiration_ms
        expired = [pid for pid, e in self.producers.items()
                   if e.current_txn_first_offset is None and e.last_update_ms <= limit]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def clear(self, map_end_offset: int) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self.map_end_offset = map_end_offset

    # -- snapshots -----------------------------------------------------------------------------
    def snapshot_offsets(self) -> list[int]:
        offsets = []
        try:
            names = self.fs.listdir(self.directory)
        except FileNotFoundError:
            return []
        for name in names:
            m = _SNAPSHOT_NAME.match(name)
            if m:
                offsets.append(int(m.group(1)))
        return sorted(offsets)

    def take_snapshot(self, *, durable: bool) -> Path:
        """Write the state as of map_end_offset to `<map_end_offset>.snapshot`."""
        return write_snapshot(self.fs, self.directory, self.map_end_offset, self.encode_snapshot(), durable=durable)

    def encode_snapshot(self) -> bytes:
        """The state as of map_end_offset, as a snapshot file holds it (to write on any thread:
        write_snapshot)."""
        parts = []
        for e in self.producers.values():
            txn = -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
            parts.append(_SNAP_ENTRY.pack(e.producer_id, e.epoch, e.coordinator_epoch, e.last_timestamp,
                                          e.last_update_ms, txn, len(e.batches)))
            parts.extend(_SNAP_BATCH.pack(*b) for b in e.batches)
        body = struct.pack(">qi", self.map_end_offset, len(self.producers)) + b"".join(parts)
        crc = crc32c.crc32c(body)
        return struct.pack(">hI", SNAPSHOT_VERSION, crc) + body

    def _read_snapshot(self, path: Path) -> tuple[int, list[ProducerEntry]]:
        data = self.fs.read(path)
        if len(data) < _SNAP_HEADER.size:
            raise ValueError("shorter than its header")
        version, crc, offset, count = _SNAP_HEADER.unpack_from(data)
        if version != SNAPSHOT_VERSION:
            raise ValueError(f"unsupported version {version}")
        if crc32c.crc32c(data[6:]) != crc:
            raise ValueError("CRC mismatch")
        pos = _SNAP_HEADER.size
        entries = []
        for _ in range(count):
            pid, epoch, coord, ts, updated, txn, n = _SNAP_ENTRY.unpack_from(data, pos)
            pos += _SNAP_ENTRY.size
            e = ProducerEntry(pid, epoch, deque(maxlen=NUM_BATCHES_TO_RETAIN), None if txn < 0 else txn, coord, ts,
                              updated)
            for _ in range(n):
                e.batches.append(BatchMetadata(*_SNAP_BATCH.unpack_from(data, pos)))
                pos += _SNAP_BATCH.size
            entries.append(e)
        if pos != len(data):
            raise ValueError("trailing bytes")
        return offset, entries

    def load_latest_snapshot(self, max_offset: int) -> int | None:
        """Load the newest readable snapshot at or below max_offset; returns its offset.

        Unreadable snapshots are deleted (they can only cost replay time, never correctness).
        With none, the state is cleared and None returned: the caller replays from log start.
        """
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_offset:
                continue
            path = snapshot_path(self.directory, offset)
            try:
                snap_offset, entries = self._read_snapshot(path)
                if snap_offset != offset:
                    raise ValueError(f"holds offset {snap_offset}")
            except (OSError, ValueError, struct.error) as err:
                log.warning("producer snapshot unreadable, deleted", file=str(path), reason=str(err))
                self.fs.unlink(path)
                continue
            self.clear(offset)
            for e in entries:
                self.producers[e.producer_id] = e
                if e.current_txn_first_offset is not None:
                    self._ongoing[e.producer_id] = e.current_txn_first_offset
            return offset
        return None

    def delete_snapshots(self, offsets: Iterable[int]) -> None:
        for offset in offsets:
            self.fs.unlink(snapshot_path(self.directory, offset))

    def delete_snapshots_above(self, offset: int) -> None:
        self.delete_snapshots(o for o in self.snapshot_offsets() if o > offset)

    def delete_snapshots_below(self, offset: int) -> None:
        self.delete_snapshots(o for o in self.snapshot_offsets() if o < offset)
