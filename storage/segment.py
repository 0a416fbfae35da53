"""One log segment: a .log file of whole v2 batches plus its three index files.

Files are named by the segment's base offset, 20 digits zero-padded (00000000000000000000.log,
.index, .timeindex, .txnindex), so a directory listing sorts them in offset order.

All file access is positional (pwrite / pread, through the injected storage.fs.FileSystem): an
append is one pwrite at the end, a read is one pread of only the needed range, and nothing
depends on a shared file position.

A segment keeps a small "tail state" (end offset, largest timestamp and the offset that reached
it, bytes since the last index entry) needed to keep appending. It is exact for the active
segment; for older segments loaded at startup it is filled in only if something asks.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import structlog

from protocol.batch import HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET, BatchHeader, compute_crc, read_header
from protocol.errors import ErrorCode, KafkaError

from ._index import IndexWrite
from .config import LogConfig
from .fs import File, FileSystem
from .offset_index import OffsetIndex
from .time_index import TimeIndex
from .txn_index import TransactionIndex

log = structlog.get_logger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
# A segment taken out of its log, its files waiting to be unlinked off the event loop (Kafka's
# ".deleted"); a start after a crash removes what is left of them.
DELETED_SUFFIX = ".deleted"

INT32_MAX = 0x7FFFFFFF
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

_SCAN_CHUNK = 64 * 1024  # header scans: covers an index interval of small batches in one read
_RECOVER_CHUNK = 4 * 1024 * 1024  # CRC validation reads whole batches; large reads, few calls
_PREFIX = struct.Struct(">qi")  # base_offset, batch_length
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23

# (position in the appended buffer, base offset, size in bytes, max timestamp)
BatchPlacement = tuple[int, int, int, int]
BatchCallback = Callable[[bytes | memoryview, int, BatchHeader], None]


class _BadIndex:
    """Marks an index entry that does not point at the batch it names."""


_BAD_INDEX = _BadIndex()


def unlink_all(fs: FileSystem, paths: list[Path]) -> None:
    """Remove retired segment files (LogSegment.retire); what a crash leaves is removed at load."""
    for path in paths:
        fs.unlink(path)


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class SegmentRead(NamedTuple):
    data: bytes | memoryview
    first_offset: int  # base offset of the first batch found (returned or held back); -1: none here
    next_offset: int  # offset after the last batch returned; the requested offset if none


@dataclass(frozen=True, slots=True)
class SegmentRecovery:
    validated_batches: int
    truncated_bytes: int


class LogSegment:
    def __init__(self, fs: FileSystem, directory: Path, base_offset: int, config: LogConfig,
                 created_ms: int) -> None:
        """Bind to the files of segment `base_offset`; use create() or open_existing()."""
        name = segment_name(base_offset)
        self.fs = fs
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.created_ms = created_ms
        self.log_path = directory / (name + LOG_SUFFIX)
        self.index = OffsetIndex(fs, directory / (name + INDEX_SUFFIX), base_offset, config.max_index_entries)
        self.time_index = TimeIndex(fs, directory / (name + TIME_INDEX_SUFFIX), base_offset,
                                    config.max_time_index_entries)
        self.txn_index = TransactionIndex(fs, directory / (name + TXN_INDEX_SUFFIX))
        self._file: File | None = None
        self.size = 0
        # tail state
        self._tail_known = False
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self._bytes_since_index = 0
        self._first_batch_ts: int | None = None
        self._index_checked = False

    # -- lifecycle -----------------------------------------------------------------------------
    @classmethod
    def create(cls, fs: FileSystem, directory: Path, base_offset: int, config: LogConfig,
               now_ms: int) -> LogSegment:
        """A new empty segment; stale files of the same name (from a crashed roll) are replaced."""
        seg = cls(fs, directory, base_offset, config, now_ms)
        seg._file = fs.open(seg.log_path, create=True, truncate=True)
        seg.index.reset()
        seg.time_index.reset()
        seg.txn_index.reset()
        seg._tail_known = True
        seg._index_checked = True
        return seg

    @classmethod
    def open_existing(cls, fs: FileSystem, directory: Path, base_offset: int, config: LogConfig,
                      now_ms: int) -> LogSegment:
        """Attach to an existing segment without reading it (its indexes load on first use)."""
        seg = cls(fs, directory, base_offset, config, now_ms)
        seg.size = fs.stat(seg.log_path).size
        return seg

    @property
    def file(self) -> File:
        """The .log file, opened on first use (a partition's old segments stay closed until read)."""
        if self._file is None:
            self._file = self.fs.open(self.log_path, create=True)
        return self._file

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def close(self) -> None:
        self.index.persist()
        self.time_index.persist()
        self.txn_index.drop_cache()
        self._close_file()

    def release(self) -> None:
        """Close the file without writing anything: the segment's files are about to be
        replaced by cleaned ones (close() would persist this object's index entries over them)."""
        self.txn_index.drop_cache()
        self._close_file()

    def retire(self) -> list[Path]:
        """Close the segment and rename its files to *.deleted; returns the new paths. A rename is
        a metadata change, cheap enough for the event loop; unlinking a large file is not always
        (retention may drop gigabytes at once), so that is left to the caller's worker thread."""
        self.close()
        moved: list[Path] = []
        for path in (self.log_path, self.index.path, self.time_index.path, self.txn_index.path):
            target = path.with_name(path.name + DELETED_SUFFIX)
            try:
                self.fs.rename(path, target)
            except FileNotFoundError:
                continue  # an index never written
            moved.append(target)
        return moved

    def delete(self) -> None:
        """Remove the files, the .log first: a crash in between leaves only orphan indexes,
        which the next open deletes, never a log without its indexes."""
        self._close_file()
        self.fs.unlink(self.log_path)
        self.index.delete()
        self.time_index.delete()
        self.txn_index.delete()

    def flush(self) -> None:
        """fsync the log and its indexes (the indexes are persisted first)."""
        self.file.sync()
        self.index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def seal(self) -> list[IndexWrite]:
        """The segment stops being active: record its largest timestamp as the final time-index
        entry (what time retention reads later). Returns the index entries to write (no fsync
        needed), for the caller to write off its thread: a sealed segment's entries no longer change."""
        self.ensure_tail()
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        return self.take_index_writes()

    def take_index_writes(self) -> list[IndexWrite]:
        """The offset- and time-index entries not yet in their files (see IndexWrite)."""
        return [self.index.take_write(), self.time_index.take_write()]

    # -- state ---------------------------------------------------------------------------------
    @property
    def is_empty(self) -> bool:
        return self.size == 0

    @property
    def indexes_full(self) -> bool:
        return self.index.is_full or self.time_index.is_full

    def index_files_look_sane(self) -> bool:
        """Cheap startup check (no loading): the index files exist and hold whole entries."""
        return (self.index.file_looks_sane() and self.time_index.file_looks_sane()
                and self.txn_index.file_looks_sane())

    @property
    def rolling_base_timestamp(self) -> int:
        """Timestamp the segment's age is measured from: the first batch's max timestamp."""
        if self._first_batch_ts is None:
            ts = -1
            if self.size >= HEADER_SIZE:
                data = self.file.pread(HEADER_SIZE, 0)
                if len(data) == HEADER_SIZE and data[MAGIC_OFFSET] == 2:
                    ts = read_header(data).max_timestamp
            self._first_batch_ts = ts
        return self._first_batch_ts

    @property
    def largest_timestamp(self) -> int:
        """Largest batch timestamp in the segment (-1 if none), for time retention."""
        if self._tail_known:
            return self.max_timestamp
        ts = self.time_index.peek_last_timestamp()
        if ts < 0 and self.size > 0:
            self.ensure_tail()
            return self.max_timestamp
        return ts

    def last_modified_ms(self) -> int:
        return self.fs.stat(self.log_path).mtime_ms

    def ensure_tail(self) -> None:
        if not self._tail_known:
            self._ensure_index()
            if self._scan_tail(None) < 0:
                self.rebuild_indexes()

    def _ensure_index(self) -> None:
        """Rebuild the indexes from the log if they turn out unusable when first loaded."""
        if self._index_checked:
            return
        self._index_checked = True
        reason = self.index.load() or self.time_index.load()
        if reason is None and not self.index.positions_within(self.size):
            reason = "position beyond the log"
        if reason is not None:
            log.warning("segment index unusable, rebuilding from the log", segment=str(self.log_path),
                        reason=reason)
            self.rebuild_indexes()

    def rebuild_indexes(self) -> None:
        """Re-derive the offset and time index from batch headers (the log is trusted here)."""
        self.index.reset()
        self.time_index.reset()
        self._reset_tail()
        for pos, h in self.iter_headers(0):
            self._index_batch(pos, h.base_offset, h.size, h.max_timestamp)
            self.next_offset = h.next_offset
        self._tail_known = True
        self._index_checked = True

    def _reset_tail(self) -> None:
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self._bytes_since_index = 0

    def _index_batch(self, pos: int, base_offset: int, size: int, max_ts: int) -> None:
        """The append-path indexing rule: an entry once more than index_interval_bytes were
        written since the previous one; the time index follows the offset index."""
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = base_offset
        if self._bytes_since_index > self.config.index_interval_bytes:
            self.index.append(base_offset, pos)
            if self.max_timestamp >= 0:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def _scan_tail(self, stop_offset: int | None) -> int:
        """Fill the tail state from the last index entries plus a header scan to the end (or to
        the batch boundary at stop_offset); returns the position where the scan stopped.

        The last time-index entry holds the largest timestamp up to the last offset-index entry
        (they are added together), so scanning from that entry's position is enough. Returns -1
        if the index entry does not point at a batch with its offset (the index is wrong).
        """
        entry_offset, pos = self.index.last_entry()
        ts, ts_offset = self.time_index.last_entry()
        self.max_timestamp = ts
        self.offset_of_max_timestamp = ts_offset if ts >= 0 else self.base_offset
        self._bytes_since_index = 0
        self.next_offset = self.base_offset
        end = pos
        first = True
        for p, h in self.iter_headers(pos):
            if first and pos > 0 and h.base_offset != entry_offset:
                return -1
            first = False
            if stop_offset is not None and h.base_offset >= stop_offset:
                break
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                self.offset_of_max_timestamp = h.base_offset
            self._bytes_since_index += h.size
            self.next_offset = h.next_offset
            end = p + h.size
            if stop_offset is not None and h.next_offset >= stop_offset:
                break
        if first and pos > 0:
            return -1
        self._tail_known = True
        return end

    # -- scanning ------------------------------------------------------------------------------
    def iter_headers(self, start_pos: int, end_pos: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from start_pos, reading headers only.

        Stops quietly at anything that is not a whole batch (the torn tail of a crashed log).
        """
        end = self.size if end_pos is None else min(end_pos, self.size)
        file = self.file
        pos = start_pos
        buf = b""
        buf_start = pos
        while pos + HEADER_SIZE <= end:
            rel = pos - buf_start
            if rel + HEADER_SIZE > len(buf):
                buf = file.pread(min(_SCAN_CHUNK, end - pos), pos)
                buf_start = pos
                rel = 0
                if len(buf) < HEADER_SIZE:
                    return
            if buf[rel + MAGIC_OFFSET] != 2:
                return
            h = read_header(buf, rel)
            if h.batch_length < MIN_BATCH_LENGTH or pos + h.size > end:
                return
            yield pos, h
            pos += h.size

    def read_bytes(self, pos: int, size: int) -> bytes:
        return self.file.pread(size, pos)

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= offset (it may start before offset)."""
        found = self._locate(offset)
        if found is None:
            return None
        pos = found[0]
        return pos, read_header(self.file.pread(HEADER_SIZE, pos))

    def _locate(self, offset: int) -> tuple[int, int, int, int] | None:
        """(position, base offset, size, last offset) of the first batch with last offset >= offset."""
        self._ensure_index()
        found = self._scan_for(offset)
        if found is _BAD_INDEX:
            log.warning("offset index does not match the log, rebuilding", segment=str(self.log_path))
            self.rebuild_indexes()
            found = self._scan_for(offset)
        return None if isinstance(found, _BadIndex) else found

    def _scan_for(self, offset: int) -> tuple[int, int, int, int] | None | _BadIndex:
        """Walk batch headers from the index entry below `offset`, unpacking only the three
        fields needed (a full BatchHeader per skipped batch would dominate a fetch)."""
        entry_offset, pos = self.index.lookup(offset)
        end = self.size
        file = self.file
        buf = b""
        buf_start = pos
        first = True
        while pos + HEADER_SIZE <= end:
            rel = pos - buf_start
            if rel + HEADER_SIZE > len(buf):
                buf = file.pread(min(_SCAN_CHUNK, end - pos), pos)
                buf_start, rel = pos, 0
                if len(buf) < HEADER_SIZE:
                    break
            base, length = _PREFIX.unpack_from(buf, rel)
            size = length + LOG_OVERHEAD
            if buf[rel + MAGIC_OFFSET] != 2 or length < MIN_BATCH_LENGTH or pos + size > end:
                break
            # An index entry names the base offset of the batch at its position: check it.
            if first and pos > 0 and base != entry_offset:
                return _BAD_INDEX
            first = False
            last = base + _LAST_OFFSET_DELTA.unpack_from(buf, rel + _LAST_OFFSET_DELTA_AT)[0]
            if last >= offset:
                return pos, base, size, last
            pos += size
        if first and pos > 0:
            return _BAD_INDEX  # the entry points at no batch at all
        return None

    # -- append --------------------------------------------------------------------------------
    def append(self, data: bytes | bytearray | memoryview, batches: list[BatchPlacement], next_offset: int) -> None:
        """Write whole batches (offsets already assigned) with one pwrite, then index them."""
        start = self.size
        try:
            self.file.pwrite(data, start)
        except OSError as e:
            # Leave no torn batch behind: readers and the next append assume whole batches.
            try:
                self.file.truncate(start)
            except OSError:
                pass
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"write to {self.log_path.name} failed: {e}") from e
        self._after_write(start, len(data), batches, next_offset)

    def _after_write(self, start: int, total: int, batches: list[BatchPlacement], next_offset: int) -> None:
        if start == 0 and batches:
            self._first_batch_ts = batches[0][3]
        for pos, base_offset, size, max_ts in batches:
            self._index_batch(start + pos, base_offset, size, max_ts)
        self.size = start + total
        self.next_offset = next_offset

    def append_parts(self, parts: list[bytes | memoryview], total: int, batches: list[BatchPlacement],
                     next_offset: int) -> None:
        """As append(), from pieces written with one pwritev (no concatenation copy)."""
        start = self.size
        try:
            file = self.file
            n = file.pwritev(parts, start)
            if n < total:  # short write (rare: signals, quotas); finish it the plain way
                file.pwrite(b"".join(parts)[n:], start + n)
        except OSError as e:
            try:
                self.file.truncate(start)
            except OSError:
                pass
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"write to {self.log_path.name} failed: {e}") from e
        self._after_write(start, total, batches, next_offset)

    # -- read ----------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, *, max_position: int | None = None,
             upper_bound: int | None = None) -> SegmentRead:
        """Whole batches from the one containing `offset`, up to max_bytes, stopping before any
        batch with an offset at or above upper_bound or reaching past max_position.

        The first batch is returned even when it alone exceeds max_bytes (so a consumer with a
        small fetch size still makes progress, as in Kafka since KIP-74).
        """
        found = self._locate(offset)
        if found is None:
            return SegmentRead(b"", -1, offset)
        pos, first_base, first_size, first_last = found
        limit = self.size if max_position is None else min(self.size, max_position)
        if pos + first_size > limit or (upper_bound is not None and first_last >= upper_bound):
            return SegmentRead(b"", first_base, offset)
        want = min(limit - pos, max(max_bytes, first_size))
        data = self.file.pread(want, pos)
        n = len(data)
        end = 0
        next_offset = offset
        while end + HEADER_SIZE <= n:
            base, length = _PREFIX.unpack_from(data, end)
            size = length + LOG_OVERHEAD
            if end + size > n:
                break
            last = base + _LAST_OFFSET_DELTA.unpack_from(data, end + _LAST_OFFSET_DELTA_AT)[0]
            if upper_bound is not None and last >= upper_bound:
                break
            end += size
            next_offset = last + 1
        out: bytes | memoryview = data if end == n else memoryview(data)[:end]
        return SegmentRead(out, first_base, next_offset)

    def find_offset_by_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, int] | None:
        """(offset, max timestamp) of the first batch at or after min_offset whose max timestamp
        is >= timestamp; None if this segment has none."""
        self._ensure_index()
        _, ts_offset = self.time_index.lookup(timestamp)
        _, pos = self.index.lookup(max(ts_offset, min_offset))
        for _, h in self.iter_headers(pos):
            if h.last_offset >= min_offset and h.max_timestamp >= timestamp:
                return max(h.base_offset, min_offset), h.max_timestamp
        return None

    # -- recovery and truncation ---------------------------------------------------------------
    def recover(self, trusted_offset: int, on_batch: BatchCallback | None = None) -> SegmentRecovery:
        """Re-validate everything from the batch boundary at trusted_offset and cut the log at
        the first batch that is torn, corrupt (CRC, length, magic) or out of offset order.

        Below trusted_offset (the recovery point) the log and its indexes were fsynced, so they
        are only read for the tail state; at and above it the indexes are rebuilt as the
        batches are validated. on_batch sees each validated batch (for producer state and
        leader epochs).
        """
        self.size = self.file.size()
        start_pos = 0
        if trusted_offset > self.base_offset and self.index_files_look_sane():
            self.index.truncate_to_offset(trusted_offset)
            self.time_index.truncate_to_offset(trusted_offset)
            if self.index.corrupt_reason is None and self.time_index.corrupt_reason is None:
                start_pos = self._scan_tail(trusted_offset)
            else:
                start_pos = -1
            if start_pos < 0:
                log.warning("segment index unusable, re-validating the whole segment",
                            segment=str(self.log_path))
                start_pos = 0
        if start_pos == 0:
            self.index.reset()
            self.time_index.reset()
            self._reset_tail()
        self.index.truncate_to_position(start_pos)
        # Aborts whose marker is below the recovery point were fsynced with the segment; the
        # rest is re-added by on_batch as the markers are re-validated.
        self.txn_index.truncate_to(max(trusted_offset, self.base_offset))
        validated, end = self._validate_from(start_pos, on_batch)
        truncated = self.size - end
        if truncated:
            log.warning("truncating torn or corrupt log tail", segment=str(self.log_path),
                        position=end, bytes=truncated)
            self.file.truncate(end)
            self.size = end
        self._tail_known = True
        self._index_checked = True
        self._first_batch_ts = None
        return SegmentRecovery(validated, truncated)

    def _validate_from(self, pos: int, on_batch: BatchCallback | None) -> tuple[int, int]:
        file = self.file
        size = self.size
        expected = self.next_offset
        count = 0
        buf = b""
        buf_start = pos
        while pos < size:
            rel = pos - buf_start
            if rel + HEADER_SIZE > len(buf):
                buf = file.pread(min(_RECOVER_CHUNK, size - pos), pos)
                buf_start, rel = pos, 0
                if len(buf) < HEADER_SIZE:
                    break
            if buf[rel + MAGIC_OFFSET] != 2:
                break
            h = read_header(buf, rel)
            if h.batch_length < MIN_BATCH_LENGTH or pos + h.size > size:
                break
            if rel + h.size > len(buf):
                buf = file.pread(max(h.size, min(_RECOVER_CHUNK, size - pos)), pos)
                buf_start, rel = pos, 0
                if len(buf) < h.size:
                    break
            if compute_crc(buf, rel, h.size) != h.crc:
                break
            if (h.base_offset < expected or h.last_offset_delta < 0
                    or h.last_offset - self.base_offset > INT32_MAX):
                break
            if on_batch is not None:
                on_batch(buf, rel, h)
            self._index_batch(pos, h.base_offset, h.size, h.max_timestamp)
            expected = h.next_offset
            self.next_offset = expected
            pos += h.size
            count += 1
        return count, pos

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= offset; returns the bytes removed.

        A batch straddling `offset` goes entirely (batches are never split), so the segment may
        end below `offset`.
        """
        found = self.find_batch(offset)
        if found is None:
            self.ensure_tail()
            return 0
        pos, h = found
        removed = self.size - pos
        self.index.truncate_to_position(pos)
        self.time_index.truncate_to_offset(h.base_offset)
        self.txn_index.truncate_to(h.base_offset)
        self.file.truncate(pos)
        self.size = pos
        if pos == 0:
            self._first_batch_ts = None
        if self._scan_tail(None) < 0:
            self.rebuild_indexes()
        return removed
