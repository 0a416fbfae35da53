"""A FileSystem that delegates to another (the real one by default) and records every call, so a
test can see what storage did to its files, or fail one operation to stand in for a crash."""

from __future__ import annotations

from pathlib import Path

from storage.faults import Fault, FaultyFileSystem
from storage.fs import OS_FS, FileSystem


class RecordingFileSystem(FaultyFileSystem):
    def __init__(self, inner: FileSystem = OS_FS, fault: Fault | None = None) -> None:
        super().__init__(inner, self.note)
        self.fault = fault  # may be replaced while files are open: it is read at every call
        self.calls: list[tuple[str, Path]] = []

    def note(self, op: str, path: Path) -> None:
        self.calls.append((op, path))
        if self.fault is not None:
            self.fault(op, path)

    def ops(self, path: Path) -> list[str]:
        """The operations done on `path`, in order."""
        return [op for op, p in self.calls if p == path]
