"""The .txnindex file: the aborted transactions whose abort marker lives in this segment.

Entry (34 bytes, big-endian): version int16 (0), producer_id int64, first_offset int64,
last_offset int64 (the abort marker's offset), last_stable_offset int64 (the partition's LSO
right after this abort). read_committed fetches ask which aborted transactions overlap the
fetched range; a transaction's entry sits in the segment of its marker, which is never before
the fetched range if they overlap, so a search walks forward from the segment holding the fetch
offset and may stop once an entry's last_stable_offset reaches the end of the range: every
transaction still open at that point started at or after the LSO.

Aborts are rare, so entries are written at once (one small write, no fsync: below the recovery
point the file is fsynced with the segment; above it recovery rebuilds it) and read in full on
first query. The file is always the truth, so loaded entries are only a cache: at most
MAX_CACHED_INDEXES segments' entries stay in memory broker-wide, least recently used dropped
first, so a long history of aborts does not live in memory for the life of the process.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from pathlib import Path
from typing import NamedTuple

import structlog

from .fs import FileSystem

log = structlog.get_logger(__name__)

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
VERSION = 0
MAX_CACHED_INDEXES = 1024


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    # Indexes whose entries are in memory, least recently used first (shared by every log).
    _cached: OrderedDict[TransactionIndex, None] = OrderedDict()

    def __init__(self, fs: FileSystem, path: Path) -> None:
        self.fs = fs
        self.path = path
        self._entries: list[AbortedTxn] | None = None

    @property
    def cached(self) -> bool:
        return self._entries is not None

    def _remember(self) -> None:
        cache = TransactionIndex._cached
        cache[self] = None
        cache.move_to_end(self)
        while len(cache) > MAX_CACHED_INDEXES:
            old, _ = cache.popitem(last=False)
            old._entries = None

    def drop_cache(self) -> None:
        TransactionIndex._cached.pop(self, None)
        self._entries = None

    def _load(self) -> list[AbortedTxn]:
        if self._entries is not None:
            TransactionIndex._cached.move_to_end(self)
            return self._entries
        try:
            data = self.fs.read(self.path)
        except FileNotFoundError:
            data = b""
        whole = len(data) - len(data) % ENTRY_SIZE
        if whole != len(data):
            # A torn append: drop it so later appends stay aligned.
            log.warning("txn index has a partial entry, dropped", file=str(self.path), size=len(data))
            self._truncate_file(whole)
        entries = []
        for version, pid, first, last, lso in _ENTRY.iter_unpack(data[:whole]):
            if version != VERSION:
                log.warning("txn index entry of unknown version, stopped there", file=str(self.path),
                            version=version)
                break
            entries.append(AbortedTxn(pid, first, last, lso))
        self._entries = entries
        self._remember()
        return entries

    def file_looks_sane(self) -> bool:
        try:
            return self.fs.stat(self.path).size % ENTRY_SIZE == 0
        except FileNotFoundError:
            return False

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._load())

    def append(self, txn: AbortedTxn) -> None:
        entries = self._load()
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(f"aborted txn {txn} does not follow {entries[-1]}")
        f = self.fs.open(self.path, create=True)
        try:
            f.pwrite(_ENTRY.pack(VERSION, *txn), f.size())
        finally:
            f.close()
        entries.append(txn)

    def collect(self, start: int, end: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [start, end), and whether the search may stop after this segment."""
        found = []
        complete = False
        for txn in self._load():
            if txn.last_offset >= start and txn.first_offset < end:
                found.append(txn)
            if txn.last_stable_offset >= end:
                complete = True
                break
        return found, complete

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or above `offset`."""
        entries = self._load()
        keep = [t for t in entries if t.last_offset < offset]
        if len(keep) == len(entries):
            return
        self._entries = keep
        self._truncate_file(len(keep) * ENTRY_SIZE)

    def _truncate_file(self, size: int) -> None:
        try:
            f = self.fs.open(self.path)
        except FileNotFoundError:
            return
        try:
            f.truncate(size)
        finally:
            f.close()

    def reset(self) -> None:
        self.fs.open(self.path, create=True, truncate=True).close()
        self._entries = []
        self._remember()

    def flush(self) -> None:
        try:
            f = self.fs.open(self.path, read_only=True)
        except FileNotFoundError:
            return
        try:
            f.sync()
        finally:
            f.close()

    def delete(self) -> None:
        self.drop_cache()
        self.fs.unlink(self.path)
