"""What the offset and time indexes share: a sparse sorted file held in memory, written lazily.

The index files are append-only (no preallocation, no mmap). New entries live in memory and
reach the file only on `persist()` (close) or through an `IndexWrite` (roll, flush), which can
run on an I/O thread: an index is only trusted below the recovery point, and the recovery point
moves only after a flush, which writes the entries first. So the append path never touches an
index file, and a crash can only lose entries that recovery rebuilds anyway. Entries are only
ever added at the end or cut by a truncation, so an IndexWrite (the bytes of entries
[persisted, count) at their place) can run late or twice: it writes what is there already,
unless a truncation came between, which the log's WriteGuard rules out (storage/offload.py).

Entries are loaded on first use, so opening a partition with many old segments reads nothing but
the newest one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar, NamedTuple

import structlog

from .fs import FileSystem

log = structlog.get_logger(__name__)


class IndexWrite(NamedTuple):
    """Entries of an index not yet in its file, taken on the owner's thread to be written on
    any thread; `target.mark_persisted(upto)` on the owner's thread once written."""

    target: SparseIndex
    data: bytes
    position: int
    upto: int  # entries in the file once written

    def write(self, *, sync: bool) -> None:
        """Write the entries (no truncation: a later write of the same index may have run
        first and written more) and fsync if asked. A file that is gone belongs to a segment
        deleted or retired meanwhile: nothing to write."""
        try:
            f = self.target.fs.open(self.target.path)
        except FileNotFoundError:
            return
        try:
            if self.data:
                f.pwrite(self.data, self.position)
            if sync:
                f.sync()
        finally:
            f.close()


class SparseIndex(ABC):
    """An index of one segment: `base_offset` + relative keys, entries of `ENTRY_SIZE` bytes."""

    ENTRY_SIZE: ClassVar[int]

    def __init__(self, fs: FileSystem, path: Path, base_offset: int, max_entries: int) -> None:
        self.fs = fs
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._loaded = False
        self._persisted = 0  # entries known to be in the file, in this order
        self.corrupt_reason: str | None = None

    # -- subclass hooks ------------------------------------------------------------------------
    @abstractmethod
    def _decode(self, data: bytes) -> None:
        """Replace the in-memory entries with those encoded in `data` (whole entries)."""

    @abstractmethod
    def _encode(self, start: int, end: int) -> bytes:
        """Encode entries [start, end) for the file."""

    @abstractmethod
    def _count(self) -> int:
        """Entries in memory."""

    @abstractmethod
    def _drop_from(self, n: int) -> None:
        """Keep only the first n entries in memory."""

    @abstractmethod
    def _structure_error(self) -> str | None:
        """Why the loaded entries cannot be right (not strictly increasing...), or None."""

    # -- shared behaviour ----------------------------------------------------------------------
    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        try:
            data = self.fs.read(self.path)
        except FileNotFoundError:
            data = b""
            self.corrupt_reason = "missing"
        whole = len(data) - len(data) % self.ENTRY_SIZE
        if whole != len(data):
            self.corrupt_reason = f"size {len(data)} is not a multiple of {self.ENTRY_SIZE}"
        self._decode(data[:whole])
        self._persisted = self._count()
        if self.corrupt_reason is None:
            self.corrupt_reason = self._structure_error()

    def load(self) -> str | None:
        """Load the entries if not yet in memory; returns why they cannot be trusted, if so."""
        self._ensure_loaded()
        return self.corrupt_reason

    def __len__(self) -> int:
        self._ensure_loaded()
        return self._count()

    @property
    def is_full(self) -> bool:
        if not self._loaded:
            self._ensure_loaded()
        return self._count() >= self.max_entries

    def file_looks_sane(self) -> bool:
        """Cheap check without loading: the file exists and holds whole entries only."""
        try:
            size = self.fs.stat(self.path).size
        except FileNotFoundError:
            return False
        return size % self.ENTRY_SIZE == 0

    def reset(self) -> None:
        """Forget every entry, in memory and on disk (before a rebuild from the log)."""
        self._loaded = True
        self._drop_from(0)
        self._persisted = 0
        self.corrupt_reason = None
        self.fs.open(self.path, create=True, truncate=True).close()

    def _truncate_entries(self, n: int) -> None:
        self._drop_from(n)
        self._persisted = min(self._persisted, n)
        # The file may hold more than `_persisted` says: an IndexWrite that ran on the I/O thread
        # is recorded here only once its completion comes back. Cut by the file's own size.
        try:
            f = self.fs.open(self.path)
        except FileNotFoundError:
            return
        try:
            if f.size() > n * self.ENTRY_SIZE:
                f.truncate(n * self.ENTRY_SIZE)
        finally:
            f.close()

    def persist(self) -> None:
        """Write the entries not yet in the file with one write (no fsync)."""
        if not self._loaded:
            return  # nothing added since the file was written
        count = self._count()
        if count == self._persisted and self.fs.exists(self.path):
            return
        data = self._encode(self._persisted, count)
        f = self.fs.open(self.path, create=True)
        try:
            f.pwrite(data, self._persisted * self.ENTRY_SIZE)
            f.truncate(count * self.ENTRY_SIZE)
        finally:
            f.close()
        self._persisted = count

    def take_write(self) -> IndexWrite:
        """The entries not yet in the file, to write off this thread (see IndexWrite)."""
        if not self._loaded:
            return IndexWrite(self, b"", 0, self._persisted)
        count = self._count()
        return IndexWrite(self, self._encode(self._persisted, count), self._persisted * self.ENTRY_SIZE, count)

    def mark_persisted(self, count: int) -> None:
        """An IndexWrite of `count` entries ran (and no truncation came between)."""
        self._persisted = max(self._persisted, min(count, self._count()) if self._loaded else count)

    def flush(self) -> None:
        """Persist and fsync."""
        self.persist()
        f = self.fs.open(self.path, read_only=True)
        try:
            f.sync()
        finally:
            f.close()

    def delete(self) -> None:
        self.fs.unlink(self.path)
