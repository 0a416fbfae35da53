"""The .index file: sparse map from offset to the file position of the batch that starts there.

Entry (8 bytes, big-endian): relative offset int32 (batch base offset - segment base offset),
position int32 (byte position of that batch in the .log). Strictly increasing in both fields.

Unlike Kafka, which indexes a batch's last offset, we index its base offset: a lookup then
lands exactly on a batch header whose base offset we can compare with the entry, which lets a
read detect a stale or garbage index cheaply (see LogSegment._verify_entry).
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_right
from itertools import pairwise
from pathlib import Path

from ._index import SparseIndex
from .fs import FileSystem


class OffsetIndex(SparseIndex):
    ENTRY_SIZE = 8

    def __init__(self, fs: FileSystem, path: Path, base_offset: int, max_entries: int) -> None:
        super().__init__(fs, path, base_offset, max_entries)
        self._rel = array("i")
        self._pos = array("i")

    def _decode(self, data: bytes) -> None:
        flat = array("i")
        flat.frombytes(data)
        if sys.byteorder == "little":
            flat.byteswap()
        self._rel = flat[0::2]
        self._pos = flat[1::2]

    def _encode(self, start: int, end: int) -> bytes:
        flat = array("i", [0]) * (2 * (end - start))
        flat[0::2] = self._rel[start:end]
        flat[1::2] = self._pos[start:end]
        if sys.byteorder == "little":
            flat.byteswap()
        return flat.tobytes()

    def _count(self) -> int:
        return len(self._rel)

    def _drop_from(self, n: int) -> None:
        del self._rel[n:]
        del self._pos[n:]

    def _structure_error(self) -> str | None:
        if self._rel and self._rel[0] < 0:
            return "negative relative offset"
        if any(a >= b for a, b in pairwise(self._rel)):
            return "offsets not strictly increasing"
        if any(a >= b for a, b in pairwise(self._pos)):
            return "positions not strictly increasing"
        return None

    def positions_within(self, log_size: int) -> bool:
        self._ensure_loaded()
        return not self._pos or (self._pos[0] >= 0 and self._pos[-1] < log_size)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below `offset`; (base, 0) when none."""
        self._ensure_loaded()
        i = bisect_right(self._rel, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._rel[i], self._pos[i]

    def last_entry(self) -> tuple[int, int]:
        self._ensure_loaded()
        if not self._rel:
            return self.base_offset, 0
        return self.base_offset + self._rel[-1], self._pos[-1]

    def append(self, offset: int, position: int) -> None:
        self._ensure_loaded()
        rel = offset - self.base_offset
        if self._rel and (rel <= self._rel[-1] or position <= self._pos[-1]):
            raise ValueError(f"index entry ({offset}, {position}) does not follow "
                             f"({self.base_offset + self._rel[-1]}, {self._pos[-1]})")
        self._rel.append(rel)
        self._pos.append(position)

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries for batches at or above `offset`."""
        self._ensure_loaded()
        self._truncate_entries(bisect_right(self._rel, offset - self.base_offset - 1))

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past `position` (the log was cut there)."""
        self._ensure_loaded()
        self._truncate_entries(bisect_right(self._pos, position - 1))
