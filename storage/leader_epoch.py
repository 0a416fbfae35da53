"""Leader-epoch history of a partition: which epoch's leader wrote from which offset on.

Followers use it (through OffsetsForLeaderEpoch) to find where their log diverges from a new
leader's and truncate there, instead of trusting the high watermark (KIP-101/279). The history
is re-derivable from the `partition_leader_epoch` of the batches, so recovery re-assigns epochs
from the batches it re-validates: the file need only be durable before a recovery point that
covers its entries, so it is written (durably) by checkpoints and truncations, not on the append
path.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import structlog

from .checkpoint import LEADER_EPOCH_FILE, CheckpointFile
from .fs import FileSystem

log = structlog.get_logger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


def end_offset_for(entries: Sequence[tuple[int, int]], epoch: int, log_end_offset: int) -> tuple[int, int]:
    """(epoch, end offset) as OffsetsForLeaderEpoch answers it from an (epoch, start) history.

    The end offset of `epoch` is the start of the first later epoch (or the log end for the
    latest); the epoch returned is the largest known epoch <= the requested one. A module-level
    function so a leader can answer for a history plus the epoch it leads in but has not yet
    written anything under.
    """
    if epoch == UNDEFINED_EPOCH or not entries:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    if epoch == entries[-1][0]:
        return epoch, log_end_offset
    floor = None
    for e, start in entries:
        if e > epoch:
            if floor is None:
                return epoch, start
            return floor, start
        floor = e
    return UNDEFINED_EPOCH, UNDEFINED_OFFSET


class LeaderEpochCache:
    def __init__(self, fs: FileSystem, directory: Path) -> None:
        self._file = CheckpointFile(fs, directory / LEADER_EPOCH_FILE, 2)
        self.entries: list[tuple[int, int]] = []  # (epoch, start offset), both strictly increasing
        self._written: list[tuple[int, int]] | None = None  # what the file holds, if known
        self._written_durably = False

    def load(self) -> None:
        entries = [(e, o) for e, o in self._file.read()]
        clean: list[tuple[int, int]] = []
        for epoch, start in entries:
            if clean and (epoch <= clean[-1][0] or start < clean[-1][1]):
                log.warning("leader epoch checkpoint not monotonic; kept the prefix", entries=entries)
                break
            clean.append((epoch, start))
        self.entries = clean
        self._written = list(clean)
        self._written_durably = True

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; True if the history changed."""
        if epoch < 0:
            return False
        if self.entries and epoch <= self.entries[-1][0]:
            return False
        # A newer epoch starting at or before an older one's start makes the older one empty.
        while self.entries and self.entries[-1][1] >= start_offset:
            self.entries.pop()
        self.entries.append((epoch, start_offset))
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetsForLeaderEpoch answers it (see `end_offset_for`)."""
        return end_offset_for(self.entries, epoch, log_end_offset)

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after `end_offset` (the log was truncated there)."""
        while self.entries and self.entries[-1][1] >= end_offset:
            self.entries.pop()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop epochs wholly below `start_offset`; the one spanning it now starts there."""
        keep_from = 0
        for i, (_, start) in enumerate(self.entries):
            if start <= start_offset:
                keep_from = i
        entries = self.entries[keep_from:]
        if entries and entries[0][1] < start_offset:
            entries[0] = (entries[0][0], start_offset)
        self.entries = entries

    def clear(self) -> None:
        self.entries = []

    def needs_durable_write(self) -> bool:
        return not (self._written == self.entries and self._written_durably)

    def write(self) -> None:
        """Write the file durably if the history changed since it was last written."""
        if self.needs_durable_write():
            self.write_entries(tuple(self.entries))

    def write_entries(self, entries: Sequence[tuple[int, int]]) -> None:
        """Write `entries` (the history as it was when taken) durably; on any thread, under the
        log's WriteGuard (storage/offload.py)."""
        self._file.write(entries, durable=True)
        self._written = list(entries)
        self._written_durably = True
