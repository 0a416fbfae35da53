"""PartitionLog: the log of one partition, as the broker sees it.

The broker calls this synchronously from its event loop, so every call does a bounded amount of
work: an append is one pass over the batch headers and one write(); a read is an index lookup,
a short header scan and one pread. Work proportional to the data (CRC validation, rebuilding
indexes and producer state) happens only when opening after a crash, and only from the recovery
point on. The writes nobody waits for (checkpoints, snapshots and sealed indexes at a roll, the
flush policy's fsyncs) are taken here as bytes and done off the caller's thread: through the
injected `Offload` at a roll, and by the caller's I/O thread for `begin_checkpoint` /
`write_checkpoint` and `begin_flush` / `end_flush`. A per-log WriteGuard keeps them from
overwriting what the caller wrote since (storage/offload.py).

Offsets, in the order they can be:  log_start <= last_stable <= high_watermark <= log_end, and
recovery_point <= log_end (everything below the recovery point is fsynced).

Durability follows the flush policy (LogConfig.flush_messages / flush_ms), which the caller
applies: after an append, `flush_due()` says whether the policy wants a flush, and the broker
runs it (`begin_flush` / `end_flush`) on its I/O thread before acknowledging that append;
otherwise data reaches the disk when the OS writes it back, on `flush()` and on `close()`.
Either way a crash never leaves a half-written batch readable: recovery cuts the log at the
first batch that fails its length, magic or CRC check.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import structlog

from protocol.batch import (
    LOG_OVERHEAD,
    BatchHeader,
    iter_batches,
    set_base_offset,
    set_leader_epoch,
    set_max_timestamp_log_append,
)
from protocol.clock import SYSTEM_CLOCK
from protocol.control import read_transaction_marker
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.fetch import AbortedTransaction  # as a FetchResponse lists it

from . import segment_swap
from ._index import IndexWrite
from .checkpoint import (
    HIGH_WATERMARK_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    OffsetCheckpoint,
)
from .config import LogConfig
from .fs import OS_FS, File, FileSystem
from .leader_epoch import LeaderEpochCache
from .loader import Checkpoints, LogLoader, RecoveryStats, index_aborted, replay
from .offload import INLINE, Offload, WriteGuard
from .producer_state import CompletedTxn, Duplicate, ProducerStateManager, ProducerStateUpdate, write_snapshot
from .segment import (
    INT32_MAX,
    BatchPlacement,
    LogSegment,
    unlink_all,
)
from .txn_index import TransactionIndex

log = structlog.get_logger(__name__)

_SNAPSHOTS_KEPT = 3  # periodic producer snapshots (a truncation usually goes back less than one interval)

# pwritev takes at most IOV_MAX (1024 on Linux) buffers; two per batch.
_MAX_IOV_BATCHES = 500
_PREFIX = struct.Struct(">qii")  # base_offset, batch_length, partition_leader_epoch

class AppendResult(NamedTuple):
    """What an append did. (NamedTuples, not frozen dataclasses, for the per-call results:
    constructing a frozen dataclass costs several microseconds on the hot path.)"""

    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool = False  # a retry: nothing written, offsets are the original batch's
    completed_txns: tuple[CompletedTxn, ...] = ()
    batches: int = 1  # how many batches the append held (for metrics)


class ReadResult(NamedTuple):
    data: bytes | memoryview  # whole batches; empty if nothing is readable at the offset yet
    first_offset: int  # base offset of the first batch in data (may be < the requested offset); -1 if empty
    next_offset: int  # offset after the last batch in data; the requested offset if empty
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    aborted_transactions: list[AbortedTransaction] | None = None  # only with include_aborted


class DataSync(NamedTuple):
    """An fsync of a log's data, taken on the event loop and run on an I/O thread.

    Only the segment files written since the last sync (and the directory after a roll) are
    synced, not the indexes: recovery rebuilds indexes above the recovery point, so a coordinator
    waiting to act on its append needs the bytes on disk, not the index entries. The files are
    duplicates (File.dup), so a segment closed meanwhile (a deleted topic) cannot have its
    descriptor reused under the sync."""

    fs: FileSystem
    files: tuple[File, ...]
    directory: Path | None
    end_offset: int
    generation: tuple[int, int]  # (truncations, directory changes) when taken

    def run(self) -> None:
        try:
            for f in self.files:
                f.datasync()
            if self.directory is not None:
                self.fs.fsync_dir(self.directory)
        finally:
            for f in self.files:
                f.close()


class LogFlush(NamedTuple):
    """The flush policy's fsync of a log, taken on the event loop (`begin_flush`), run on an I/O
    thread, recorded back with `end_flush`: the segment files from the recovery point's segment
    on (duplicates, as DataSync's), their index entries written and fsynced, their .txnindex
    files fsynced, and the directory after a roll. Once it ran, everything below `end_offset`
    is on disk with its indexes, and the recovery point may move there."""

    fs: FileSystem
    guard: WriteGuard
    generation: int
    files: tuple[File, ...]
    indexes: tuple[IndexWrite, ...]
    txn_indexes: tuple[TransactionIndex, ...]
    directory: Path | None
    end_offset: int
    dir_changes: int

    def run(self) -> None:
        try:
            for f in self.files:
                f.sync()
            with self.guard.current(self.generation) as current:
                if current:  # else the log was truncated (or rewritten) meanwhile: end_flush ignores it
                    for w in self.indexes:
                        w.write(sync=True)
                    for t in self.txn_indexes:
                        t.flush()  # a file operation only: the index's entries are not touched here
            if self.directory is not None:
                self.fs.fsync_dir(self.directory)
        finally:
            for f in self.files:
                f.close()


class CheckpointWrite(NamedTuple):
    """What `checkpoint` writes, taken on the event loop (`begin_checkpoint`) to be written on an
    I/O thread (`write_checkpoint`): the leader epochs first (recovery re-derives epochs only
    above the recovery point, so the epoch file must never be older than a recovery-point file
    on disk), then the offsets that changed, durably; then a producer snapshot at the log end
    (not fsynced), pruning the older ones."""

    generation: int
    epochs: tuple[tuple[int, int], ...] | None
    offsets: tuple[tuple[str, int], ...]
    snapshot: tuple[int, bytes] | None
    recovery_point: int

    @property
    def writes_anything(self) -> bool:
        return self.epochs is not None or bool(self.offsets) or self.snapshot is not None


class UnexpectedAppendOffsetError(KafkaError):
    """A replicated append whose offsets do not continue the log (the follower must truncate)."""

    def __init__(self, first_offset: int, log_end_offset: int) -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR,
                         f"batch at offset {first_offset} does not follow log end {log_end_offset}")
        self.first_offset = first_offset
        self.log_end_offset = log_end_offset


class PartitionLog:
    """Segments, indexes, producer state, leader epochs and checkpoints of one partition."""

    def __init__(self, directory: Path, config: LogConfig, now_ms: Callable[[], int],
                 fs: FileSystem, offload: Offload = INLINE) -> None:
        """Use PartitionLog.open()."""
        self.fs = fs
        self._offload = offload
        self._guard = WriteGuard()
        self.directory = directory
        self.config = config
        self._now = now_ms
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._log_start = 0
        self._leo = 0
        self._hw = 0
        self._recovery_point = 0
        self._producers = ProducerStateManager(fs, directory, config.producer_id_expiration_ms)
        self._epochs = LeaderEpochCache(fs, directory)
        self._rp_file = OffsetCheckpoint(fs, directory / RECOVERY_POINT_FILE)
        self._log_start_file = OffsetCheckpoint(fs, directory / LOG_START_OFFSET_FILE)
        self._hw_file = OffsetCheckpoint(fs, directory / HIGH_WATERMARK_FILE)
        self._offset_files = {RECOVERY_POINT_FILE: self._rp_file, LOG_START_OFFSET_FILE: self._log_start_file,
                              HIGH_WATERMARK_FILE: self._hw_file}
        # checkpoint file name -> value durably written; changed only under the WriteGuard's lock
        # (an off-thread checkpoint records what it wrote itself, before a truncation can look)
        self._written: dict[str, int | None] = {}
        self._snapshot_end = -1  # producer snapshot last taken for a checkpoint (not re-encoded)
        self._last_flush_ms = 0
        self._dir_dirty = False
        self._synced = 0  # everything below is on disk (data only; see DataSync)
        self._truncations = 0
        self._dir_changes = 0
        self._closed = False
        self._retired_files: list[Path] = []
        self.recovery_stats = RecoveryStats(0, 0, 0, 0, 0, None, 0)
        # Called with the new log end after every truncation: a copy of this log being made
        # elsewhere (a replica moving to another log directory) must drop what it took beyond.
        self.on_truncate: Callable[[int], None] | None = None

    # ==========================================================================================
    # opening and recovery
    # ==========================================================================================
    @classmethod
    def open(cls, directory: Path, config: LogConfig, *,
             now_ms: Callable[[], int] = SYSTEM_CLOCK.now_ms, fs: FileSystem = OS_FS,
             offload: Offload = INLINE) -> PartitionLog:
        """Open (or create) the log in `directory`, recovering whatever a crash left behind.
        Every file operation of the log goes through `fs` (a simulated disk in simulations); the
        writes of a roll go through `offload` (the broker's I/O thread; by default, at once)."""
        directory = Path(directory)
        fs.mkdir(directory)
        self = cls(directory, config, now_ms, fs, offload)
        self._load()
        return self

    def _load(self) -> None:
        self._last_flush_ms = self._now()
        checkpoints = Checkpoints(self._rp_file, self._log_start_file, self._hw_file)
        loaded = LogLoader(self.fs, self.directory, self.config, self._producers, self._epochs, checkpoints,
                           self._now).load()
        self._segments = loaded.segments
        self._bases = [s.base_offset for s in loaded.segments]
        self._log_start, self._leo = loaded.log_start, loaded.log_end
        self._hw, self._recovery_point = loaded.high_watermark, loaded.recovery_point
        self._written = loaded.written
        self._synced = loaded.log_end  # the loader fsynced what it re-validated
        self.recovery_stats = loaded.stats
        if loaded.fresh:
            self._mark_dir_dirty()
            self.flush()
        self.checkpoint()

    # ==========================================================================================
    # properties
    # ==========================================================================================
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._hw

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        if value > self._leo:
            raise ValueError(f"high watermark {value} beyond log end {self._leo}")
        self._hw = max(value, self._log_start)
        self._producers.on_high_watermark(self._hw)

    @property
    def last_stable_offset(self) -> int:
        """Below this, every transaction is decided: read_committed consumers read up to here."""
        first_unstable = self._producers.first_unstable_offset()
        if first_unstable is None:
            return self._hw
        return max(self._log_start, min(first_unstable, self._hw))

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def producer_state(self) -> ProducerStateManager:
        """Producer entries (read them, do not change them): for DescribeProducers and tests."""
        return self._producers

    @property
    def leader_epochs(self) -> list[tuple[int, int]]:
        """(epoch, start offset) history."""
        return list(self._epochs.entries)

    @property
    def latest_epoch(self) -> int:
        return self._epochs.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetsForLeaderEpoch answers; (-1, -1) if unknown."""
        return self._epochs.end_offset_for(epoch, self._leo)

    @property
    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """The segments, oldest first, the active one last (for the cleaner: read, do not change)."""
        return tuple(self._segments)

    def replace_segments(self, groups: Sequence[segment_swap.SwapGroup],
                         fault: segment_swap.FaultHook | None = None) -> None:
        """Swap in segments the cleaner staged (see storage.segment_swap), each replacing a run
        of consecutive inactive segments starting at its own base offset.

        Offsets, the log end and the recovery point do not move: a cleaned segment holds a
        subset of the batches of those it replaces, at their original offsets, and was fsynced
        before the swap.
        """
        self._check_open()
        index_of = {seg.base_offset: i for i, seg in enumerate(self._segments)}
        replaced: list[int] = []
        for _new_base, olds in groups:
            first = index_of.get(olds[0]) if olds else None
            if first is None or [s.base_offset for s in self._segments[first:first + len(olds)]] != list(olds):
                raise ValueError(f"{list(olds)} is not a run of segments of {self.directory}")
            if first + len(olds) >= len(self._segments):
                raise ValueError("the active segment cannot be replaced")
            replaced.extend(range(first, first + len(olds)))
        with self._guard.changing():  # the files under these names are replaced
            for i in replaced:
                self._segments[i].release()
            try:
                segment_swap.commit(self.fs, self.directory, groups, fault)
            except OSError:
                # Finish the swap if it was committed (the old files may be gone already), else it
                # was rolled back and the old segments stay in use.
                if not segment_swap.recover(self.fs, self.directory):
                    raise
        now = self._now()
        new_by_first = {olds[0]: LogSegment.open_existing(self.fs, self.directory, new_base, self.config, now)
                        for new_base, olds in groups}
        gone = set(replaced)
        segments: list[LogSegment] = []
        for i, seg in enumerate(self._segments):
            if seg.base_offset in new_by_first:
                segments.append(new_by_first[seg.base_offset])
            elif i not in gone:
                segments.append(seg)
        self._segments = segments
        self._bases = [s.base_offset for s in segments]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    def update_config(self, config: LogConfig) -> None:
        """Apply changed topic settings (they take effect from the next append/retention run)."""
        self.config = config
        self._producers.expiration_ms = config.producer_id_expiration_ms
        for seg in self._segments:
            seg.config = config

    # ==========================================================================================
    # append
    # ==========================================================================================
    def append(self, records: bytes | bytearray | memoryview, *, leader_epoch: int,
               assign_offsets: bool = True) -> AppendResult:
        """Append one or more whole v2 batches.

        assign_offsets=True is the leader path: client (or coordinator) batches get the next
        offsets and `leader_epoch`, producer state is validated (all batches or none are
        written), duplicates are answered with their original offsets. assign_offsets=False is
        the follower path: the batches keep the leader's offsets and epochs and are applied to
        producer state without checks; their offsets must continue the log.

        The CRC is not re-checked here (the broker checked it on receipt; recovery checks it
        after a crash); the framing is, by protocol.batch.iter_batches(strict=True).
        """
        self._check_open()
        batches = list(iter_batches(records, strict=True))
        if not batches:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "no record batch in the append")
        leader = assign_offsets
        bases: list[int] = []
        max_ts = -1
        has_producer = False
        next_offset = self._leo
        if leader:
            segment_bytes = self.config.segment_bytes
            for _, h in batches:
                delta = h.last_offset_delta
                if h.records_count != delta + 1:
                    raise KafkaError(ErrorCode.INVALID_RECORD,
                                     f"batch says {h.records_count} records but spans {delta + 1} offsets")
                if h.batch_length + LOG_OVERHEAD > segment_bytes:
                    raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                                     f"batch of {h.batch_length + LOG_OVERHEAD} bytes exceeds segment size "
                                     f"{segment_bytes}")
                bases.append(next_offset)
                next_offset += delta + 1
                if h.max_timestamp > max_ts:
                    max_ts = h.max_timestamp
                if h.producer_id >= 0:
                    has_producer = True
        else:
            for _, h in batches:
                if h.base_offset < next_offset:
                    raise UnexpectedAppendOffsetError(h.base_offset, self._leo)
                bases.append(h.base_offset)
                next_offset = h.base_offset + h.last_offset_delta + 1
                if h.max_timestamp > max_ts:
                    max_ts = h.max_timestamp
                if h.producer_id >= 0:
                    has_producer = True

        now = self._now()
        update = self._producers.begin(validate=leader, now_ms=now)
        if has_producer:
            duplicate = self._check_producers(records, batches, bases, update, leader)
            if duplicate is not None:
                return duplicate

        first_offset = bases[0]
        last_offset = next_offset - 1
        seg = self._segments[-1]
        if self._should_roll(seg, len(records), max_ts, first_offset, last_offset, now):
            seg = self._roll(first_offset, now)

        log_append_time = -1
        placements: list[BatchPlacement] = []
        if not leader:
            for (pos, h), base in zip(batches, bases, strict=True):
                placements.append((pos, base, h.batch_length + LOG_OVERHEAD, h.max_timestamp))
            seg.append(records, placements, next_offset)
        elif self.config.message_timestamp_type == "LogAppendTime":
            # The timestamp is inside the CRC: this path copies and re-checksums.
            log_append_time = now
            buf = bytearray(records)
            for (pos, h), base in zip(batches, bases, strict=True):
                size = h.batch_length + LOG_OVERHEAD
                set_base_offset(buf, pos, base)
                set_leader_epoch(buf, pos, leader_epoch)
                set_max_timestamp_log_append(buf, pos, size, now)
                placements.append((pos, base, size, now))
            seg.append(buf, placements, next_offset)
        elif len(batches) <= _MAX_IOV_BATCHES:
            # Zero copy: a new 16-byte prefix (base offset, length, leader epoch — all outside the
            # CRC) per batch, and the client's bytes from the magic byte on, in one pwritev.
            view = memoryview(records)
            parts: list[bytes | memoryview] = []
            for (pos, h), base in zip(batches, bases, strict=True):
                size = h.batch_length + LOG_OVERHEAD
                parts.append(_PREFIX.pack(base, h.batch_length, leader_epoch))
                parts.append(view[pos + _PREFIX.size:pos + size])
                placements.append((pos, base, size, h.max_timestamp))
            seg.append_parts(parts, len(records), placements, next_offset)
        else:
            buf = bytearray(records)
            for (pos, h), base in zip(batches, bases, strict=True):
                set_base_offset(buf, pos, base)
                set_leader_epoch(buf, pos, leader_epoch)
                placements.append((pos, base, h.batch_length + LOG_OVERHEAD, h.max_timestamp))
            seg.append(buf, placements, next_offset)

        self._leo = next_offset
        # A new epoch reaches its file at the next checkpoint, which writes it before any
        # recovery point covering it (recovery re-derives the epochs above the recovery point).
        if leader:
            self._epochs.assign(leader_epoch, first_offset)
        else:
            for _, h in batches:
                self._epochs.assign(h.partition_leader_epoch, h.base_offset)
        if has_producer:
            self._commit_producer_update(seg, update)
        return AppendResult(first_offset, last_offset, log_append_time, self._log_start,
                            completed_txns=tuple(update.completed), batches=len(batches))

    def _check_producers(self, records: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]],
                         bases: list[int], update: ProducerStateUpdate, leader: bool) -> AppendResult | None:
        """Stage the producer-state effect of the batches; a duplicate retry returns its result."""
        duplicates: list[Duplicate] = []
        for (pos, h), base in zip(batches, bases, strict=True):
            if h.producer_id < 0:
                continue
            if h.is_control:
                update.append_marker(h, read_transaction_marker(records, pos, h), base)
                continue
            if leader:
                dup = update.find_duplicate(h)
                if dup is not None:
                    duplicates.append(dup)
                    continue
            update.append_data(h, base, base + h.last_offset_delta)
        if not duplicates:
            return None
        if len(duplicates) != len(batches):
            raise KafkaError(ErrorCode.INVALID_RECORD, "append mixes retried and new batches")
        lat = self.config.message_timestamp_type == "LogAppendTime"
        return AppendResult(duplicates[0].first_offset, duplicates[-1].last_offset,
                            duplicates[-1].timestamp if lat else -1, self._log_start, duplicate=True,
                            batches=len(batches))

    def _commit_producer_update(self, seg: LogSegment, update: ProducerStateUpdate) -> None:
        self._producers.commit(update, self._leo, self._hw)
        index_aborted(self._producers, seg, update.completed)

    def _should_roll(self, seg: LogSegment, size: int, max_ts: int, first_offset: int, last_offset: int,
                     now: int) -> bool:
        if last_offset - seg.base_offset > INT32_MAX:
            return True  # relative offsets in the indexes are int32
        if seg.is_empty:
            return False
        if seg.size + size > self.config.segment_bytes or seg.indexes_full:
            return True
        # Age as Kafka measures it: by record timestamps when both sides have them (so a burst
        # of old data replayed into a topic does not roll a segment per append), else wall clock.
        base_ts = seg.rolling_base_timestamp
        age = max_ts - base_ts if base_ts >= 0 and max_ts >= 0 else now - seg.created_ms
        return age > self.config.segment_ms

    def _roll(self, base_offset: int, now: int) -> LogSegment:
        old = self._segments[-1]
        indexes: list[IndexWrite] = []
        if old.is_empty:
            # Nothing to keep: start the empty active segment at the right offset instead.
            old.delete()
            self._segments.pop()
            self._bases.pop()
        else:
            indexes = old.seal()
        seg = LogSegment.create(self.fs, self.directory, base_offset, self.config, now)
        self._segments.append(seg)
        self._bases.append(base_offset)
        self._mark_dir_dirty()
        # The snapshot lets recovery start producer state here instead of replaying older
        # segments. Neither it nor the sealed segment's index entries are fsynced (the snapshot
        # is CRC-checked on load, and losing it only costs replay; the indexes are rebuilt above
        # the recovery point), and nothing waits for them: written off the loop.
        snapshot = (self._producers.map_end_offset, self._producers.encode_snapshot())
        generation = self._guard.generation
        self._offload.submit(lambda: self._write_rolled(generation, indexes, snapshot),
                             lambda: self._mark_indexes_written(generation, indexes))
        return seg

    def _write_rolled(self, generation: int, indexes: list[IndexWrite], snapshot: tuple[int, bytes]) -> None:
        """On the I/O thread: what a roll leaves to write."""
        with self._guard.current(generation) as current:
            if not current:
                return  # truncated or rewritten since: these bytes may describe another log
            for w in indexes:
                w.write(sync=False)
            write_snapshot(self.fs, self.directory, snapshot[0], snapshot[1], durable=False)

    def _mark_indexes_written(self, generation: int, indexes: Sequence[IndexWrite]) -> None:
        if generation == self._guard.generation:
            for w in indexes:
                w.target.mark_persisted(w.upto)

    def roll(self) -> None:
        """Start a new segment at the log end (no-op if the active segment is empty)."""
        self._check_open()
        if not self._segments[-1].is_empty:
            self._roll(self._leo, self._now())

    # ==========================================================================================
    # flush and checkpoints
    # ==========================================================================================
    def flush_due(self, now_ms: int | None = None) -> bool:
        """The flush policy wants a flush now (flush_messages records or flush_ms since the last
        one). The caller runs it: `flush()`, or `begin_flush` / `end_flush` off its thread."""
        if self._recovery_point >= self._leo:
            return False
        fm = self.config.flush_messages
        if fm is not None and self._leo - self._recovery_point >= fm:
            return True
        now = self._now() if now_ms is None else now_ms
        return self.config.flush_ms is not None and now - self._last_flush_ms >= self.config.flush_ms

    def rolled_unflushed(self) -> bool:
        """A segment closed by a roll holds records that are not flushed yet. Kafka flushes the
        closed segments at each roll, whatever the flush policy, so that recovery after a crash
        re-checks the active segment only (everything below the recovery point is trusted), not
        everything written since the broker started; so does Ketch (Partition asks for it)."""
        return self._recovery_point < self._segments[-1].base_offset

    def maybe_flush(self, now_ms: int | None = None) -> None:
        """Flush here if the flush policy says it is time."""
        self._check_open()
        if self.flush_due(now_ms):
            self.flush()

    def flush(self) -> None:
        """fsync everything above the recovery point, then move the recovery point to the end.

        The recovery-point file is not rewritten here (that is `checkpoint()`): recovery after
        a crash merely starts from an older, still correct, point.
        """
        job = self.begin_flush()
        if job is not None:
            job.run()
            self.end_flush(job)
        else:
            self._synced = self._leo
            self._last_flush_ms = self._now()

    def begin_flush(self) -> LogFlush | None:
        """What `flush()` does, to run off the event loop (LogFlush); None if nothing is to do.
        Hand the result to `end_flush` once it has run."""
        self._check_open()
        if self._recovery_point >= self._leo and not self._dir_dirty:
            return None
        segments = self._segments[self._segment_index(self._recovery_point):]
        return LogFlush(self.fs, self._guard, self._guard.generation, tuple(seg.file.dup() for seg in segments),
                        tuple(w for seg in segments for w in seg.take_index_writes()),
                        tuple(seg.txn_index for seg in segments), self.directory if self._dir_dirty else None,
                        self._leo, self._dir_changes)

    def end_flush(self, job: LogFlush) -> None:
        """Record a LogFlush that ran: the recovery point moves to its end unless the log was
        truncated or rewritten meanwhile (then the indexes were not written; the next flush
        covers it)."""
        if job.generation == self._guard.generation:
            for w in job.indexes:
                w.target.mark_persisted(w.upto)
            self._recovery_point = max(self._recovery_point, min(job.end_offset, self._leo))
            self._synced = max(self._synced, min(job.end_offset, self._leo))
        if job.directory is not None and job.dir_changes == self._dir_changes:
            self._dir_dirty = False
        self._last_flush_ms = self._now()

    def _mark_dir_dirty(self) -> None:
        self._dir_dirty = True
        self._dir_changes += 1

    @property
    def synced_offset(self) -> int:
        """Everything below is on disk (flushed or synced)."""
        return self._synced

    def begin_sync(self) -> DataSync | None:
        """What makes every append so far durable, to run off the event loop; None if nothing
        needs it. Hand the result back to `end_sync` once it has run."""
        self._check_open()
        if self._synced >= self._leo and not self._dir_dirty:
            return None
        segments = self._segments[self._segment_index(self._synced):] if self._synced < self._leo else []
        return DataSync(self.fs, tuple(seg.file.dup() for seg in segments),
                        self.directory if self._dir_dirty else None, self._leo,
                        (self._truncations, self._dir_changes))

    def end_sync(self, sync: DataSync) -> None:
        """Record a DataSync that ran: what it covered is durable unless the log was truncated
        (the offsets may hold other batches now) or its directory changed again meanwhile."""
        truncations, dir_changes = sync.generation
        if truncations == self._truncations:
            self._synced = max(self._synced, min(sync.end_offset, self._leo))
        if sync.directory is not None and dir_changes == self._dir_changes:
            self._dir_dirty = False

    def checkpoint(self) -> None:
        """Durably write the recovery point, log start, high watermark and epoch files that
        changed, and snapshot producer state at the log end, here (at open and close, and after
        a truncation to a new start). The broker's periodic checkpoint (Kafka: every 60 s) runs
        `begin_checkpoint` / `write_checkpoint` instead, the writing on its I/O thread."""
        with self._guard.changing():
            job = self.begin_checkpoint()
            self.write_checkpoint(job)

    def begin_checkpoint(self) -> CheckpointWrite:
        """What `checkpoint()` writes, taken now (see CheckpointWrite)."""
        self._check_open()
        epochs = tuple(self._epochs.entries) if self._epochs.needs_durable_write() else None
        offsets = tuple((name, value) for name, value in ((RECOVERY_POINT_FILE, self._recovery_point),
                                                          (LOG_START_OFFSET_FILE, self._log_start),
                                                          (HIGH_WATERMARK_FILE, self._hw))
                        if self._written.get(name) != value)
        # Snapshot producer state at the log end if it moved since the last one. A follower's
        # truncation (and recovery after a crash) replays the log from the newest snapshot below
        # it; with snapshots only at segment rolls, a partition that had not rolled replayed its
        # whole log on the event loop — in the chaos campaign an hour of batches, a broker
        # stalled for seconds.
        snapshot = None
        end = self._producers.map_end_offset
        if end == self._leo and end > self._log_start and end != self._snapshot_end:
            snapshot = (end, self._producers.encode_snapshot())
            self._snapshot_end = end
        return CheckpointWrite(self._guard.generation, epochs, offsets, snapshot, self._recovery_point)

    def write_checkpoint(self, job: CheckpointWrite) -> bool:
        """Write what `begin_checkpoint` took; on any thread. False, writing nothing, if the log
        changed its files since (a truncation, DeleteRecords, a compaction swap, a close)."""
        with self._guard.current(job.generation) as current:
            if not current:
                return False
            if job.epochs is not None:
                self._epochs.write_entries(job.epochs)
            for name, value in job.offsets:
                self._offset_files[name].write(value, durable=True)
                self._written[name] = value
            if job.snapshot is not None:
                self._write_checkpoint_snapshot(*job.snapshot, recovery_point=job.recovery_point)
            return True

    def _write_checkpoint_snapshot(self, end: int, data: bytes, *, recovery_point: int) -> None:
        """Not fsynced, like the roll snapshot; the newest few are kept, and the newest at or
        below the recovery point (what recovery after a crash can use)."""
        offsets = self._producers.snapshot_offsets()
        if offsets and offsets[-1] >= end:
            return
        write_snapshot(self.fs, self.directory, end, data, durable=False)
        keep = set(offsets[len(offsets) - (_SNAPSHOTS_KEPT - 1):])
        durable = [o for o in offsets if o <= recovery_point]
        keep.update(durable[-1:])
        self._producers.delete_snapshots(o for o in offsets if o not in keep)

    def close(self) -> None:
        """Flush, snapshot producer state at the log end and write every checkpoint, so the
        next open re-validates nothing."""
        if self._closed:
            return
        with self._guard.changing():  # whatever is still queued for the I/O thread is dropped
            self.flush()
            self._producers.map_end_offset = self._leo
            self._producers.take_snapshot(durable=True)
            self.checkpoint()
            for seg in self._segments:
                seg.close()
            unlink_all(self.fs, self.take_retired_files())
            self._closed = True

    def release(self) -> None:
        """Close the files without flushing or writing anything: the directory is being thrown
        away (a copy abandoned) or was replaced (a replica moved to another log directory, or on
        a disk that failed). Background writes still queued for this log are dropped."""
        with self._guard.changing():
            for seg in self._segments:
                try:
                    seg.release()
                except OSError:
                    pass
            self._closed = True

    def delete(self) -> None:
        """Remove the partition's directory and everything in it."""
        with self._guard.changing():
            for seg in self._segments:
                try:
                    seg.close()
                except OSError:
                    pass
            self._closed = True
            self.fs.remove_tree(self.directory)

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"log {self.directory} is closed")

    # ==========================================================================================
    # read
    # ==========================================================================================
    def _segment_index(self, offset: int) -> int:
        return max(0, bisect_right(self._bases, offset) - 1)

    def read(self, offset: int, max_bytes: int, *, upper_bound: int | None = None,
             include_aborted: bool = False) -> ReadResult:
        """Whole batches from the one containing `offset`: at least one batch if any is
        readable (even past max_bytes), none with an offset at or above upper_bound (pass the
        high watermark, or the LSO for read_committed). One segment per call, like Kafka.

        Raises OFFSET_OUT_OF_RANGE below the log start or above the log end.
        """
        self._check_open()
        if offset < self._log_start or offset > self._leo:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"offset {offset} outside [{self._log_start}, {self._leo}]")
        bound = self._leo if upper_bound is None else min(upper_bound, self._leo)
        data: bytes | memoryview = b""
        first = -1
        next_offset = offset
        if offset < bound:
            for seg in self._segments[self._segment_index(offset):]:
                if seg.base_offset >= bound:
                    break
                r = seg.read(offset, max_bytes, upper_bound=bound)
                if r.first_offset < 0:
                    continue  # nothing at or after offset in this segment: try the next one
                if r.data:
                    data, first, next_offset = r.data, r.first_offset, r.next_offset
                break
        aborted = None
        if include_aborted:
            aborted = self.aborted_transactions(offset, next_offset) if data else []
        return ReadResult(data, first, next_offset, self._hw, self.last_stable_offset, self._log_start,
                          self._leo, aborted)

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTransaction]:
        """Aborted transactions overlapping [start, end), from the segments' .txnindex files."""
        self._check_open()
        out: list[AbortedTransaction] = []
        if end <= start:
            return out
        for seg in self._segments[self._segment_index(start):]:
            found, complete = seg.txn_index.collect(start, end)
            out.extend(AbortedTransaction(t.producer_id, t.first_offset) for t in found)
            if complete:
                break
        return out

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first batch whose max timestamp is >= `timestamp`.

        The offset is that batch's base offset (records are not decoded, so it may point at a
        few records older than `timestamp` in the same batch), and the timestamp is the batch's
        max timestamp. None if no batch is that recent. ListOffsets' special values (-1 latest,
        -2 earliest) are the caller's to map to log_end_offset / log_start_offset.
        """
        self._check_open()
        if timestamp < 0:
            raise ValueError(f"timestamp {timestamp} is a ListOffsets sentinel, not a time")
        for seg in self._segments[self._segment_index(self._log_start):]:
            if seg.largest_timestamp < timestamp:
                continue
            found = seg.find_offset_by_timestamp(timestamp, self._log_start)
            if found is not None:
                return found
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the batch holding the largest timestamp, ListOffsets'
        MAX_TIMESTAMP; the earliest such batch on a tie, as Kafka. The offset is that batch's
        base offset: the caller decodes the one batch to name the record. None on an empty log."""
        self._check_open()
        best: tuple[int, int] | None = None
        for seg in self._segments[self._segment_index(self._log_start):]:
            seg.ensure_tail()
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best[1]):
                best = (max(seg.offset_of_max_timestamp, self._log_start), seg.max_timestamp)
        return best

    # ==========================================================================================
    # truncation, retention
    # ==========================================================================================
    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or above `offset` (a follower diverging from its leader).

        Batches are never split: one straddling `offset` is dropped whole and the log end
        becomes its base offset.

        Done here, durably, before the caller appends at the new end (the recovery-point file
        must be lowered before an offset is rewritten), under the WriteGuard: a checkpoint or
        roll write taken before is dropped, and one running is waited for.
        """
        self._check_open()
        if offset >= self._leo:
            return
        with self._guard.changing():
            if offset < self._log_start or offset <= self._segments[0].base_offset:
                self.truncate_fully_and_start_at(offset)
                return
            # Before any file changes: a power loss part way (some segments deleted, the file cut
            # or not) must not reopen trusting offsets that are gone, nor a producer snapshot there.
            self._lower_recovery_point(offset)
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                self._segments.pop().delete()
                self._bases.pop()
            seg = self._segments[-1]
            seg.truncate_to(offset)
            new_end = seg.next_offset
            if new_end < self._log_start:
                self.truncate_fully_and_start_at(offset)
                return
            self._leo = new_end
            self._after_truncation()
            seg.flush()
            self.fs.fsync_dir(self.directory)

    def _after_truncation(self) -> None:
        leo = self._leo
        self._truncations += 1
        self._snapshot_end = -1
        self._synced = min(self._synced, leo)
        self._hw = min(self._hw, leo)
        self._epochs.truncate_from_end(leo)
        self._producers.delete_snapshots_above(leo)
        snap = self._producers.load_latest_snapshot(leo)
        if snap is None:
            self._producers.clear(self._log_start)
        replay(self._producers, self._segments, max(snap or 0, self._log_start), leo, self._hw, self._now())
        self._producers.map_end_offset = leo
        self._producers.on_high_watermark(self._hw)
        self._lower_recovery_point(leo)
        self._epochs.write()
        if self.on_truncate is not None:
            self.on_truncate(leo)

    def _lower_recovery_point(self, end: int) -> None:
        """The recovery point, in memory and in its file (durably), to at most `end`: the file
        must not vouch for offsets being removed or rewritten."""
        self._recovery_point = min(self._recovery_point, end)
        written_rp = self._written.get(RECOVERY_POINT_FILE)
        if written_rp is None or written_rp > end:
            self._rp_file.write(self._recovery_point, durable=True)
            self._written[RECOVERY_POINT_FILE] = self._recovery_point

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at `offset` (a follower far behind)."""
        self._check_open()
        with self._guard.changing():
            for seg in reversed(self._segments):
                seg.delete()
            now = self._now()
            self._segments = [LogSegment.create(self.fs, self.directory, offset, self.config, now)]
            self._bases = [offset]
            self._log_start = self._leo = self._hw = self._recovery_point = offset
            self._truncations += 1
            self._snapshot_end = -1
            self._producers.delete_snapshots(self._producers.snapshot_offsets())
            self._producers.clear(offset)
            self._epochs.clear()
            self._mark_dir_dirty()
            self.flush()
            self.checkpoint()
        if self.on_truncate is not None:
            self.on_truncate(offset)

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete old segments by age and total size; returns how many were deleted.

        Never the active segment, and never data at or above the high watermark. Also deletes
        segments wholly below a log start moved by delete_records_before.
        """
        self._check_open()
        now = self._now() if now_ms is None else now_ms
        count = self._delete_below_log_start()
        if self.config.deletes:
            if self.config.retention_ms >= 0:
                while self._oldest_deletable():
                    seg = self._segments[0]
                    ts = seg.largest_timestamp
                    if ts < 0:
                        ts = seg.last_modified_ms()  # no timestamps in the data: file age
                    if now - ts <= self.config.retention_ms:
                        break
                    count += self._delete_oldest()
            if self.config.retention_bytes >= 0:
                excess = self.size_in_bytes - self.config.retention_bytes
                while self._oldest_deletable() and excess - self._segments[0].size >= 0:
                    excess -= self._segments[0].size
                    count += self._delete_oldest()
        if count:
            self._after_head_deletion()
        return count

    def _oldest_deletable(self) -> bool:
        """The oldest segment is not the active one and lies wholly below the high watermark."""
        return len(self._segments) > 1 and self._segments[1].base_offset <= self._hw

    def _delete_below_log_start(self) -> int:
        count = 0
        while self._oldest_deletable() and self._segments[1].base_offset <= self._log_start:
            count += self._delete_oldest()
        return count

    def _delete_oldest(self) -> int:
        seg = self._segments.pop(0)
        self._bases.pop(0)
        log.info("deleting segment", directory=str(self.directory), base_offset=seg.base_offset,
                 size=seg.size)
        self._retired_files.extend(seg.retire())
        return 1

    def take_retired_files(self) -> list[Path]:
        """Files of segments removed from the log (retention, DeleteRecords), renamed *.deleted,
        for the caller to unlink (storage.segment.unlink_all), off the event loop."""
        files, self._retired_files = self._retired_files, []
        return files

    def _after_head_deletion(self) -> None:
        first_base = self._segments[0].base_offset
        self._log_start = max(self._log_start, first_base)
        self._recovery_point = max(self._recovery_point, first_base)
        self._epochs.truncate_from_start(self._log_start)  # its file follows at the next checkpoint
        self._producers.delete_snapshots_below(first_base)

    def delete_records_before(self, offset: int) -> int:
        """Move the log start to `offset` (DeleteRecords); returns the new log start.

        Segments wholly below it are deleted now; the rest of the first segment stays on disk
        but is no longer readable.

        The checkpoint is written (fsynced) before any segment goes and before the caller
        answers: a crash at any point reopens with the new start or, if the checkpoint did not
        make it, with the old one and every old segment still there — never with a start that
        fell back to the base of some middle segment.
        """
        self._check_open()
        if offset < 0 or offset > self._hw:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"cannot delete records up to {offset}: outside [0, high watermark {self._hw}]")
        if offset <= self._log_start:
            return self._log_start
        with self._guard.changing():
            self._log_start_file.write(offset, durable=True)
            self._written[LOG_START_OFFSET_FILE] = offset
        self._log_start = offset
        self._delete_below_log_start()
        self._after_head_deletion()
        return self._log_start

    def follow_log_start(self, offset: int) -> int:
        """A follower's log start following its leader's; returns the new log start.

        The leader moves its start only up to its own high watermark, so everything below it is
        committed; the follower learns that high watermark one fetch late and may still be below
        the new start. Its high watermark is raised to the start rather than the start refused
        (a refusal repeated on every fetch froze the follower's log start and high watermark for
        good). A start past the log end empties the log and starts it there (Kafka's
        truncateFullyAndStartAt).
        """
        self._check_open()
        if offset > self._leo:
            self.truncate_fully_and_start_at(offset)
            return self._log_start
        if offset > self._hw:
            self._hw = offset
            self._producers.on_high_watermark(self._hw)
        return self.delete_records_before(offset)

    def expire_producers(self, now_ms: int | None = None) -> int:
        """Forget idle producers (producer_id_expiration_ms); returns how many."""
        return self._producers.remove_expired(self._now() if now_ms is None else now_ms)

    def __repr__(self) -> str:
        return (f"PartitionLog({str(self.directory)!r}, start={self._log_start}, end={self._leo}, "
                f"hw={self._hw}, segments={len(self._segments)})")
