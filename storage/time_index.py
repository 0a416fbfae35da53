"""The .timeindex file: sparse map from timestamp to the offset where it was first reached.

Entry (12 bytes, big-endian): timestamp int64, relative offset int32. An entry (T, o) says: the
largest timestamp among the segment's batches up to the batch at base offset o is T, and batch o
is the first to reach it. Entries are strictly increasing in both fields, so every batch before
o has a max timestamp below T — which is what makes "start scanning at the last entry with
T <= target" correct for offset_for_timestamp.

Entries are added alongside offset-index entries and once more when the segment is rolled, so
the last entry of an inactive segment holds its largest timestamp (what time retention reads).
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from itertools import pairwise
from pathlib import Path

from ._index import SparseIndex
from .fs import FileSystem

_ENTRY = struct.Struct(">qi")


class TimeIndex(SparseIndex):
    ENTRY_SIZE = 12

    def __init__(self, fs: FileSystem, path: Path, base_offset: int, max_entries: int) -> None:
        super().__init__(fs, path, base_offset, max_entries)
        self._ts = array("q")
        self._rel = array("i")

    def _decode(self, data: bytes) -> None:
        self._ts = array("q")
        self._rel = array("i")
        for ts, rel in _ENTRY.iter_unpack(data):
            self._ts.append(ts)
            self._rel.append(rel)

    def _encode(self, start: int, end: int) -> bytes:
        return b"".join(_ENTRY.pack(self._ts[i], self._rel[i]) for i in range(start, end))

    def _count(self) -> int:
        return len(self._ts)

    def _drop_from(self, n: int) -> None:
        del self._ts[n:]
        del self._rel[n:]

    def _structure_error(self) -> str | None:
        if self._rel and self._rel[0] < 0:
            return "negative relative offset"
        if any(a >= b for a, b in pairwise(self._ts)):
            return "timestamps not strictly increasing"
        if any(a >= b for a, b in pairwise(self._rel)):
            return "offsets not strictly increasing"
        return None

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= `timestamp`; (-1, base) if none."""
        self._ensure_loaded()
        i = bisect_right(self._ts, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._ts[i], self.base_offset + self._rel[i]

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the newest entry; (-1, base) if the index is empty."""
        self._ensure_loaded()
        if not self._ts:
            return -1, self.base_offset
        return self._ts[-1], self.base_offset + self._rel[-1]

    def peek_last_timestamp(self) -> int:
        """The newest entry's timestamp, reading only that entry if the index is not loaded."""
        if self._loaded:
            return self._ts[-1] if self._ts else -1
        try:
            f = self.fs.open(self.path, read_only=True)
        except OSError:
            return -1
        try:
            size = f.size()
            size -= size % self.ENTRY_SIZE
            if size == 0:
                return -1
            ts: int = _ENTRY.unpack(f.pread(self.ENTRY_SIZE, size - self.ENTRY_SIZE))[0]
            return ts
        except (OSError, struct.error):
            return -1
        finally:
            f.close()

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) if it moves the maximum forward; otherwise it adds nothing."""
        self._ensure_loaded()
        if self._ts and timestamp <= self._ts[-1]:
            return
        rel = offset - self.base_offset
        if self._rel and rel <= self._rel[-1]:
            return
        self._ts.append(timestamp)
        self._rel.append(rel)

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is at or above `offset`."""
        self._ensure_loaded()
        self._truncate_entries(bisect_right(self._rel, offset - self.base_offset - 1))
