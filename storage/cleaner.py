"""Log compaction: keep only the latest record per key in the older part of a partition log.

Used for topics with cleanup.policy=compact, above all the internal topics __consumer_offsets
and __transaction_state, whose size (and the time a coordinator takes to load them) must follow
the number of live keys, not the length of their history.

One pass (`clean`):

1. The cleanable range is the run of inactive segments that end at or below the first
   uncleanable offset, min(active segment base, last stable offset): never the active segment,
   never anything at or after an open transaction's first offset, never data above the high
   watermark (the LSO is at most the HW), which a leader change could still truncate.
2. Dirty means written since the last pass (a `cleaner-offset-checkpoint` file in the partition
   directory remembers where that pass ended). A pass runs when dirty bytes are at least
   min_cleanable_ratio of the cleanable bytes, or when a delete horizon recorded by an earlier
   pass has passed (so tombstones and markers expire even on a topic nobody writes to).
3. Key map: the offset of the latest record of every key, from the first dirty offset up to
   the LSO — including the stable part of the active segment, so a value written there already
   supersedes older ones. It stops at the LSO rather than the log end: a record of a
   transaction that may still abort, or above the high watermark, must not remove the value it
   would replace. Records before the first dirty offset were compacted by an earlier pass, so
   their keys are unique there and need no map entries (Kafka's reasoning too); if the checkpoint
   is lost the map simply starts at the log start.
4. Rewrite: storage/compaction_filter.py decides per batch. Consecutive segments whose original
   sizes fit in segment_bytes (and whose offsets fit the int32 relative offsets of the indexes)
   are written as one new segment named after the first; groups of one segment that lost nothing
   are not rewritten. Indexes (offset, time, txn) are built as the batches are written.
5. Swap: storage/segment_swap.py installs the new segments so that a crash at any moment leaves
   the old or the new ones, then the checkpoint is written.

A pass reads every batch of the cleanable range (decoding its records), so its cost grows with
the size of that range. It is therefore split in three so the broker can run the long part off
its event loop: `prepare` (on the owner's thread: decide, snapshot what the pass needs, duplicate
the segments' open files so a segment deleted meanwhile stays readable), `run` (any
thread: key map, filter, write the staged segments — it touches no PartitionLog state), and
`install` (owner's thread again: swap the staged segments in, unless the log changed under the
pass, in which case its work is thrown away and the next pass starts over). `clean` does all
three in a row. The key map holds every dirty key in memory: fine for the internal topics this
exists for; large user topics would want Kafka's bounded dedupe buffer.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from protocol.batch import HEADER_SIZE, BatchHeader, iter_batches, read_header
from protocol.errors import KafkaError
from protocol.records import decode_batch

from . import segment_swap
from .checkpoint import CLEANER_CHECKPOINT_FILE, CheckpointFile
from .compaction_filter import BatchFilter, Outcome, TxnTracker
from .config import LogConfig
from .fs import File, FileSystem
from .log import PartitionLog
from .segment import INT32_MAX, BatchPlacement, LogSegment
from .txn_index import AbortedTxn

log = structlog.get_logger(__name__)

_READ_CHUNK = 4 * 1024 * 1024
_WRITE_CHUNK = 1024 * 1024
_SPILL_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CleanStats:
    """What one call of `clean` did, for logs, metrics and tests."""

    cleaned: bool  # False: nothing cleanable, or not dirty enough and no horizon due
    first_dirty_offset: int
    end_offset: int  # the pass covered offsets below this (a segment base)
    dirty_ratio: float
    segments_before: int  # segments in the cleanable range
    segments_after: int
    bytes_before: int
    bytes_after: int
    records_removed: int  # superseded records and expired tombstones
    tombstones_removed: int
    aborted_records_removed: int
    markers_removed: int
    next_delete_horizon_ms: int  # earliest time a later pass can remove more tombstones/markers; -1: none


def _checkpoint(fs: FileSystem, directory: Path) -> CheckpointFile:
    return CheckpointFile(fs, directory / CLEANER_CHECKPOINT_FILE, 2)


@dataclass(frozen=True, slots=True)
class _SegmentSnapshot:
    """A segment as it was when the pass was planned: its own handle (a dup, so deleting or
    closing the live segment does not pull the file from under a pass running elsewhere) and its
    size then (bytes appended later are not the pass's business)."""

    base_offset: int
    size: int
    file: File

    def read_bytes(self, pos: int, size: int) -> bytes:
        return self.file.pread(size, pos)


def _batches(seg: _SegmentSnapshot, start: int = 0) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """(buffer, position in it, header) of every whole batch of `seg`, reading large chunks."""
    pos = start
    while pos < seg.size:
        buf = seg.read_bytes(pos, min(_READ_CHUNK, seg.size - pos))
        used = 0
        for p, h in iter_batches(buf, strict=False):
            yield buf, p, h
            used = p + h.size
        if used == 0:
            if len(buf) < HEADER_SIZE:
                return
            size = read_header(buf).size  # one batch larger than a chunk
            if len(buf) >= size or pos + size > seg.size:
                return  # not a batch: the segment ends here (trusted data never does this)
            buf = seg.read_bytes(pos, size)
            yield buf, 0, read_header(buf)
            used = size
        pos += used


@dataclass(slots=True)
class CleanJob:
    """Everything a pass needs, taken from the log on its owner's thread by `prepare`."""

    fs: FileSystem
    directory: Path
    config: LogConfig
    now_ms: int
    retention_ms: int
    first_dirty: int
    end: int
    ratio: float
    stable: int
    total: int
    count: int  # the first `count` segments are the cleanable range
    live: list[LogSegment]  # the log's segments at planning time (install checks they are still there)
    snapshots: list[_SegmentSnapshot]
    aborted: list[AbortedTxn]
    active_producers: frozenset[int]
    _closed: bool = field(default=False)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for snap in self.snapshots:
                snap.file.close()


@dataclass(slots=True)
class CleanedSegments:
    """What `run` staged: segments to swap in and the pass's figures."""

    swaps: list[segment_swap.SwapGroup]
    sizes: list[int]
    totals: _Totals


def prepare(plog: PartitionLog, *, now_ms: int, delete_retention_ms: int | None = None,
            min_cleanable_ratio: float | None = None) -> CleanJob | CleanStats:
    """Decide whether a pass is due and snapshot what it needs; CleanStats (cleaned=False) if not.
    A returned job holds open files: `close()` it (`clean` and `install` do)."""
    retention = plog.config.delete_retention_ms if delete_retention_ms is None else delete_retention_ms
    min_ratio = plog.config.min_cleanable_dirty_ratio if min_cleanable_ratio is None else min_cleanable_ratio
    segments = plog.segments
    stable = plog.last_stable_offset
    limit = min(segments[-1].base_offset, stable)
    count = 0
    while count < len(segments) - 1 and segments[count + 1].base_offset <= limit:
        count += 1
    cleanable = segments[:count]
    end = segments[count].base_offset
    saved = _checkpoint(plog.fs, plog.directory).read()
    first_dirty, pending = (saved[0][0], saved[0][1]) if saved else (segments[0].base_offset, -1)
    if first_dirty > plog.log_end_offset:  # the log was truncated below it since
        first_dirty = segments[0].base_offset
    first_dirty = max(min(first_dirty, end), segments[0].base_offset)
    total = sum(s.size for s in cleanable)
    dirty = sum(s.size for i, s in enumerate(cleanable) if segments[i + 1].base_offset > first_dirty)
    ratio = dirty / total if total else 0.0
    horizon_due = 0 <= pending <= now_ms
    if not cleanable or not ((dirty and ratio >= min_ratio) or horizon_due):
        return CleanStats(False, first_dirty, end, ratio, len(cleanable), len(cleanable), total, total,
                          0, 0, 0, 0, pending)
    return CleanJob(
        plog.fs, plog.directory, plog.config, now_ms, retention, first_dirty, end, ratio, stable, total, count,
        list(segments), [_SegmentSnapshot(s.base_offset, s.size, s.file.dup()) for s in segments],
        [t for s in segments for t in s.txn_index.entries], frozenset(plog.producer_state.active_producers),
    )


def run(job: CleanJob) -> CleanedSegments:
    """The long part: key map, filtering, staged segments written and fsynced. Safe on any
    thread — it reads only the job's snapshots and writes only the staging directory."""
    snaps = job.snapshots
    latest = _key_map(snaps, job.first_dirty, job.stable, job.aborted)
    last_batch_of = {pid: base for pid, base in _last_batch_per_producer(snaps).items()
                     if pid in job.active_producers}
    flt = BatchFilter(latest, TxnTracker(job.aborted), last_batch_of, job.now_ms, job.retention_ms)
    writer = _Writer(job.fs, job.config, job.directory, job.now_ms)
    for i, snap in enumerate(snaps[:job.count]):
        writer.add_segment(snap, snaps[i + 1].base_offset,
                           ((flt.filter(buf, pos, h), h) for buf, pos, h in _batches(snap)))
    writer.finish()
    return CleanedSegments(writer.swaps, writer.sizes, writer.totals)


def install(plog: PartitionLog, job: CleanJob, cleaned: CleanedSegments,
            fault: segment_swap.FaultHook | None = None) -> CleanStats:
    """Swap the staged segments in, on the log owner's thread. If the log lost or replaced any
    segment of the cleaned range while the pass ran (retention, DeleteRecords, truncation, a
    delete), the staged work describes a log that no longer exists: it is discarded."""
    job.close()
    cleanable = job.live[:job.count]
    current = plog.segments
    still_there = not plog.closed and all(any(c is s for c in current) for s in cleanable)
    if not still_there:
        job.fs.remove_tree(segment_swap.staging_dir(job.directory))
        log.info("compaction pass discarded: the log changed while it ran", directory=str(job.directory))
        return CleanStats(False, job.first_dirty, job.end, job.ratio, job.count, job.count, job.total, job.total,
                          0, 0, 0, 0, -1)
    if cleaned.swaps:
        plog.replace_segments(cleaned.swaps, fault)
    else:
        plog.fs.remove_tree(segment_swap.staging_dir(plog.directory))
    t = cleaned.totals
    # Losing this file only costs a full pass next time: no fsync.
    _checkpoint(plog.fs, plog.directory).write([(job.end, t.next_horizon)], durable=False)
    segments_after = len(plog.segments) - (len(current) - job.count)
    stats = CleanStats(True, job.first_dirty, job.end, job.ratio, job.count, segments_after, job.total,
                       sum(cleaned.sizes), t.removed + t.tombstones, t.tombstones, t.aborted, t.markers,
                       t.next_horizon)
    log.info("log cleaned", directory=str(plog.directory), end_offset=job.end, bytes_before=stats.bytes_before,
             bytes_after=stats.bytes_after, segments_rewritten=len(cleaned.swaps))
    return stats


def clean(plog: PartitionLog, *, now_ms: int, delete_retention_ms: int | None = None,
          min_cleanable_ratio: float | None = None,
          fault: segment_swap.FaultHook | None = None) -> CleanStats:
    """One whole pass on the caller's thread (see the module docstring).

    delete_retention_ms and min_cleanable_ratio default to the log's config. `fault` is called
    before each step of the segment swap (tests raise from it to simulate a crash there).
    """
    job = prepare(plog, now_ms=now_ms, delete_retention_ms=delete_retention_ms,
                  min_cleanable_ratio=min_cleanable_ratio)
    if isinstance(job, CleanStats):
        return job
    try:
        cleaned = run(job)
    finally:
        job.close()
    return install(plog, job, cleaned, fault)


def _key_map(segments: Sequence[_SegmentSnapshot], start: int, stable: int,
             aborted: Sequence[AbortedTxn]) -> dict[bytes, int]:
    """key -> offset of its latest committed record in [start, stable)."""
    latest: dict[bytes, int] = {}
    tracker = TxnTracker(aborted)
    for i, seg in enumerate(segments):
        if seg.base_offset >= stable:
            break
        if i + 1 < len(segments) and segments[i + 1].base_offset <= start:
            continue  # wholly below the dirty part
        for buf, pos, h in _batches(seg):
            if h.last_offset >= stable:
                return latest
            if h.last_offset < start or h.is_control:
                continue
            tracker.advance(h.last_offset)
            if h.is_transactional and tracker.data_is_aborted(h.producer_id, h.base_offset):
                continue
            try:
                _, records = decode_batch(buf, pos)
            except KafkaError as e:
                log.warning("unreadable batch left out of compaction", offset=h.base_offset, reason=str(e))
                continue
            for r in records:
                if r.key is not None:
                    latest[r.key] = r.offset
    return latest


def _last_batch_per_producer(segments: Sequence[_SegmentSnapshot]) -> dict[int, int]:
    """producer id -> base offset of its last batch in the log."""
    last: dict[int, int] = {}
    for seg in segments:
        for _, _, h in _batches(seg):
            if h.producer_id >= 0:
                last[h.producer_id] = h.base_offset
    return last


@dataclass(slots=True)
class _Totals:
    removed: int = 0
    tombstones: int = 0
    aborted: int = 0
    markers: int = 0
    next_horizon: int = -1

    def add(self, out: Outcome) -> None:
        self.removed += out.removed_records
        self.tombstones += out.removed_tombstones
        self.aborted += out.aborted_records
        self.markers += out.marker_removed
        if out.pending_horizon is not None and (self.next_horizon < 0 or out.pending_horizon < self.next_horizon):
            self.next_horizon = out.pending_horizon


class _Writer:
    """Writes the cleaned segments into the staging directory, merging consecutive ones.

    A source segment joins the cleaned segment being written if its output fits beside what is
    there (segment_bytes, and offsets within the indexes' int32 range of its base), else starts
    a new one. When the source's original size already fits, its output is streamed; otherwise
    it is held in memory until its size is known — up to _SPILL_BYTES, beyond which it starts a
    new segment anyway, so memory stays bounded whatever the segment size. A cleaned segment
    made of one source from which nothing was removed is not swapped in (nothing to gain).
    """

    def __init__(self, fs: FileSystem, config: LogConfig, directory: Path, now_ms: int) -> None:
        self.fs = fs
        self._config = config
        self._now = now_ms
        self._dir = segment_swap.staging_dir(directory)
        fs.remove_tree(self._dir)  # a pass that failed earlier
        fs.mkdir(self._dir)
        self._seg: LogSegment | None = None
        self._olds: list[int] = []
        self._old_size = 0
        self._changed = False
        self._parts: list[bytes] = []
        self._placements: list[BatchPlacement] = []
        self._pending = 0
        self._next_offset = 0
        self.totals = _Totals()
        self.swaps: list[segment_swap.SwapGroup] = []
        self.sizes: list[int] = []  # size of every segment of the cleaned range after the pass

    def add_segment(self, seg: _SegmentSnapshot, next_base: int, outcomes: Iterator[tuple[Outcome, BatchHeader]]) -> None:
        """Write the output of source segment `seg` (which ends before next_base)."""
        if self._fits(next_base, seg.size):
            self._join(seg)
        else:
            held: list[tuple[Outcome, BatchHeader]] = []
            held_bytes = 0
            for out, h in outcomes:
                held.append((out, h))
                held_bytes += len(out.data) if out.data is not None else 0
                if held_bytes > _SPILL_BYTES:
                    break
            if held_bytes <= _SPILL_BYTES and self._fits(next_base, held_bytes):
                self._join(seg)
            else:
                self.finish()
                self._start(seg)
            for out, h in held:
                self._put(out, h)
        for out, h in outcomes:
            self._put(out, h)

    def _fits(self, next_base: int, more: int) -> bool:
        seg = self._seg
        return (seg is not None and seg.size + self._pending + more <= self._config.segment_bytes
                and next_base - 1 - seg.base_offset <= INT32_MAX)

    def _join(self, seg: _SegmentSnapshot) -> None:
        self._olds.append(seg.base_offset)
        self._old_size += seg.size
        self._changed = True  # two segments become one

    def _start(self, seg: _SegmentSnapshot) -> None:
        self._seg = LogSegment.create(self.fs, self._dir, seg.base_offset, self._config, self._now)
        self._olds = [seg.base_offset]
        self._old_size = seg.size
        self._changed = False
        self._next_offset = seg.base_offset

    def _put(self, out: Outcome, h: BatchHeader) -> None:
        self.totals.add(out)
        self._changed |= not out.verbatim
        if out.data is not None:
            self._placements.append((self._pending, h.base_offset, len(out.data), h.max_timestamp))
            self._parts.append(out.data)
            self._pending += len(out.data)
            self._next_offset = h.next_offset
            if self._pending >= _WRITE_CHUNK:
                self._write()
        if out.txn_entry is not None:
            assert self._seg is not None
            self._seg.txn_index.append(out.txn_entry)

    def _write(self) -> None:
        if self._parts:
            assert self._seg is not None
            self._seg.append(b"".join(self._parts), self._placements, self._next_offset)
            self._parts, self._placements, self._pending = [], [], 0

    def finish(self) -> None:
        """Seal, fsync and close the segment being written, and note whether to swap it in."""
        seg = self._seg
        if seg is None:
            return
        self._write()
        seg.seal()
        seg.flush()
        seg.close()
        self._seg = None
        if self._changed:
            self.swaps.append((seg.base_offset, self._olds))
            self.sizes.append(seg.size)
        else:
            self.sizes.append(self._old_size)
