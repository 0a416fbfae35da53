"""Opening a partition's log after a clean stop or a crash (Kafka's LogLoader).

Loading is the only work proportional to the data, so it lives apart from the append/read path:
finish or undo an interrupted segment swap, drop leftovers, trust everything below the recovery
point (producer state from the latest snapshot plus a header-only replay), re-validate every
batch above it (length, magic, CRC) and cut the log at the first that fails. What it returns is
the state PartitionLog starts from; nothing here keeps a reference to the log.

The replay helpers are shared with PartitionLog, which replays after a truncation.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from protocol.batch import BatchHeader
from protocol.control import ControlRecord, read_transaction_marker
from protocol.errors import KafkaError

from . import segment_swap
from .checkpoint import (
    CLEANER_CHECKPOINT_FILE,
    HIGH_WATERMARK_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    TMP_SUFFIX,
    OffsetCheckpoint,
)
from .config import LogConfig
from .fs import FileSystem
from .leader_epoch import LeaderEpochCache
from .producer_state import CompletedTxn, ProducerStateManager
from .segment import DELETED_SUFFIX, LOG_SUFFIX, LogSegment
from .txn_index import AbortedTxn

log = structlog.get_logger(__name__)

_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)$")


@dataclass(frozen=True, slots=True)
class RecoveryStats:
    """What the last open() had to do, for logs, metrics and tests."""

    recovery_point: int  # where re-validation started
    segments_validated: int
    batches_validated: int
    bytes_truncated: int
    segments_deleted: int
    producer_snapshot: int | None  # offset of the snapshot producer state started from
    batches_replayed: int  # trusted batches replayed into producer state (header scan only)


@dataclass(slots=True)
class LoadedLog:
    """The state a PartitionLog starts from."""

    segments: list[LogSegment]
    log_start: int
    log_end: int
    high_watermark: int
    recovery_point: int
    written: dict[str, int | None]  # checkpoint file name -> value found on disk
    stats: RecoveryStats
    fresh: bool  # a new, empty log: its first segment and the directory still need an fsync


@dataclass(slots=True)
class Checkpoints:
    recovery_point: OffsetCheckpoint
    log_start: OffsetCheckpoint
    high_watermark: OffsetCheckpoint


# ---- producer state from batches already in the log ----------------------------------------------
def segment_index(segments: Sequence[LogSegment], offset: int) -> int:
    return max(0, bisect_right([s.base_offset for s in segments], offset) - 1)


def apply_batch(producers: ProducerStateManager, seg: LogSegment, buf: bytes | memoryview | None, pos: int,
                h: BatchHeader, hw: int, now_ms: int, *, write_txn_index: bool) -> None:
    """Apply one batch already in the log (no validation: the log is the truth)."""
    # Batches replayed from the log count as written now: their real append time is not
    # recorded, and erring towards keeping a producer longer is the safe side of expiry.
    update = producers.begin(validate=False, now_ms=now_ms)
    if h.is_control:
        if buf is None:
            buf, pos = seg.read_bytes(pos, h.size), 0
        update.append_marker(h, _marker_or_none(buf, pos, h), h.base_offset)
    else:
        update.append_data(h, h.base_offset, h.last_offset)
    producers.commit(update, h.next_offset, hw)
    if write_txn_index:
        index_aborted(producers, seg, update.completed)


def index_aborted(producers: ProducerStateManager, seg: LogSegment, completed: Sequence[CompletedTxn]) -> None:
    for txn in completed:
        if txn.is_abort:
            seg.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                            producers.lso_after(txn)))


def replay(producers: ProducerStateManager, segments: Sequence[LogSegment], start: int, end: int, hw: int,
           now_ms: int) -> int:
    """Apply trusted batches with base offset in [start, end) to producer state (headers only)."""
    count = 0
    for seg in segments[segment_index(segments, start):]:
        if seg.base_offset >= end:
            break
        found = seg.find_batch(start)
        if found is None:
            continue
        for pos, h in seg.iter_headers(found[0]):
            if h.base_offset >= end:
                break
            if h.base_offset < start:
                continue
            if h.producer_id >= 0:
                apply_batch(producers, seg, None, pos, h, hw, now_ms, write_txn_index=False)
            count += 1
    return count


def _marker_or_none(buf: bytes | bytearray | memoryview, pos: int, h: BatchHeader) -> ControlRecord | None:
    try:
        return read_transaction_marker(buf, pos, h)
    except KafkaError as e:
        log.warning("unreadable control batch in the log, ignored", offset=h.base_offset, reason=str(e))
        return None


# ---- loading ---------------------------------------------------------------------------------------
class LogLoader:
    """One load of one partition directory into `producers` and `epochs`."""

    def __init__(self, fs: FileSystem, directory: Path, config: LogConfig, producers: ProducerStateManager,
                 epochs: LeaderEpochCache, checkpoints: Checkpoints, now_ms: Callable[[], int]) -> None:
        self.fs = fs
        self.directory = directory
        self.config = config
        self.producers = producers
        self.epochs = epochs
        self.checkpoints = checkpoints
        self.now_ms = now_ms

    def load(self) -> LoadedLog:
        now = self.now_ms()
        segment_swap.recover(self.fs, self.directory)  # before listing: finish or undo a cleaner's swap
        bases = self._scan_directory()
        rp_ckpt = self.checkpoints.recovery_point.read()
        ls_ckpt = self.checkpoints.log_start.read()
        hw_ckpt = self.checkpoints.high_watermark.read()
        written = {RECOVERY_POINT_FILE: rp_ckpt, LOG_START_OFFSET_FILE: ls_ckpt, HIGH_WATERMARK_FILE: hw_ckpt}
        self.epochs.load()
        if not bases:
            return self._fresh(ls_ckpt or 0, written, now)

        segments = [LogSegment.open_existing(self.fs, self.directory, b, self.config, now) for b in bases]
        first_base = bases[0]
        log_start = max(ls_ckpt if ls_ckpt is not None else first_base, first_base)
        rp = max(rp_ckpt if rp_ckpt is not None else first_base, first_base)
        # A segment below the recovery point whose index files are gone or torn cannot be
        # trusted as it stands: recover from it instead.
        for seg in segments:
            if seg.base_offset >= rp:
                break
            if not seg.index_files_look_sane():
                log.warning("index files missing or torn below the recovery point; recovering from there",
                            segment=seg.base_offset, recovery_point=rp)
                rp = seg.base_offset
                break
        hw = hw_ckpt if hw_ckpt is not None else log_start

        # Producer state up to the recovery point: snapshot + header-only replay of trusted batches.
        producers = self.producers
        snap = producers.load_latest_snapshot(rp)
        if snap is None:
            producers.clear(log_start)
            replay_from = log_start
        else:
            replay_from = max(snap, log_start)
        replayed = replay(producers, segments, replay_from, rp, hw, now) if replay_from < rp else 0
        producers.map_end_offset = max(replay_from, rp)

        # Re-validate from the recovery point on.
        k = segment_index(segments, rp)
        validated = truncated = seg_deleted = 0
        dense = self._dense()
        i = k
        while i < len(segments):
            seg = segments[i]
            trusted = rp if i == k else seg.base_offset
            result = seg.recover(trusted, self._on_recovered_batch(seg, hw, now))
            validated += result.validated_batches
            truncated += result.truncated_bytes
            # In a dense log, a segment ending before the next one starts lost its unsynced tail
            # while the next one's data reached the disk (writeback order across files is the
            # kernel's): what follows the hole was never synced either, and kept it would be a
            # log end past offsets the log does not hold.
            lost_tail = dense and i < len(segments) - 1 and seg.next_offset < segments[i + 1].base_offset
            if (result.truncated_bytes or lost_tail) and i < len(segments) - 1:
                later = segments[i + 1:]
                log.warning("dropping segments after a corrupt one" if result.truncated_bytes
                            else "dropping segments after one that lost its tail",
                            segments=[s.base_offset for s in later])
                for s in reversed(later):
                    s.delete()
                    seg_deleted += 1
                del segments[i + 1:]
                break
            i += 1

        active = segments[-1]
        leo = active.next_offset
        active.txn_index.truncate_to(leo)
        producers.map_end_offset = leo
        producers.delete_snapshots_above(leo)
        producers.remove_expired(now)
        self.epochs.truncate_from_end(leo)
        log_start = min(log_start, leo)
        self.epochs.truncate_from_start(log_start)
        hw = min(max(hw, log_start), leo)
        producers.on_high_watermark(hw)

        # What was re-validated is now known good: make it durable before the recovery point moves.
        if validated or truncated or seg_deleted:
            for seg in segments[k:]:
                seg.flush()
            self.fs.fsync_dir(self.directory)
        stats = RecoveryStats(rp, len(segments) - k, validated, truncated, seg_deleted, snap, replayed)
        if truncated or seg_deleted or validated:
            log.info("partition log recovered", directory=str(self.directory), recovery_point=rp,
                     log_end_offset=leo, batches_validated=validated, bytes_truncated=truncated,
                     segments_deleted=seg_deleted)
        return LoadedLog(segments, log_start, leo, hw, leo, written, stats, fresh=False)

    def _dense(self) -> bool:
        """Offsets follow each other with no gap between segments. Not so in a compacted log, nor
        in one compacted once (a cleaner checkpoint stays) whose topic now only deletes. (A
        follower that copied a compacted leader's gaps into a topic no longer compacted is not
        told apart: its recovery drops what follows such a gap, which it fetches again.)"""
        return not self.config.compacts and not self.fs.exists(self.directory / CLEANER_CHECKPOINT_FILE)

    def _fresh(self, start: int, written: dict[str, int | None], now: int) -> LoadedLog:
        # The directory may be new: its entry in the parent is durable only once the parent is
        # fsynced (fsyncing the directory itself, as every flush does, is not enough), else a
        # power loss takes the whole log, synced data and all. Before the first segment exists,
        # so that a crash in between leaves a log that opens fresh again and comes back here.
        self.fs.fsync_dir(self.directory.parent)
        segments = [LogSegment.create(self.fs, self.directory, start, self.config, now)]
        self.producers.delete_snapshots(self.producers.snapshot_offsets())
        self.producers.clear(start)
        self.epochs.clear()
        return LoadedLog(segments, start, start, start, start, written,
                         RecoveryStats(start, 0, 0, 0, 0, None, 0), fresh=True)

    def _on_recovered_batch(self, seg: LogSegment, hw: int,
                            now: int) -> Callable[[bytes | memoryview, int, BatchHeader], None]:
        def on_batch(buf: bytes | memoryview, pos: int, h: BatchHeader) -> None:
            self.epochs.assign(h.partition_leader_epoch, h.base_offset)
            if h.producer_id >= 0 and h.base_offset >= self.producers.map_end_offset:
                apply_batch(self.producers, seg, buf, pos, h, hw, now, write_txn_index=True)

        return on_batch

    def _scan_directory(self) -> list[int]:
        """Base offsets of the segments, after removing leftovers of interrupted operations."""
        logs: set[int] = set()
        others: list[tuple[int, str]] = []
        for name in sorted(self.fs.listdir(self.directory)):
            if name.endswith(TMP_SUFFIX) or name.endswith(DELETED_SUFFIX):
                self.fs.unlink(self.directory / name)
                continue
            m = _SEGMENT_FILE.match(name)
            if not m:
                continue
            base = int(m.group(1))
            if m.group(2) == LOG_SUFFIX:
                logs.add(base)
            else:
                others.append((base, name))
        for base, name in others:
            if base not in logs:
                log.info("removing index file without a log", file=name)
                self.fs.unlink(self.directory / name)
        return sorted(logs)
