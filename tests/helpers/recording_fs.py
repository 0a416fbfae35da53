"""A FileSystem that delegates to another (the real one by default) and records every call, so a
test can see what storage did to its files, or fail one operation to stand in for a crash."""

from __future__ import annotations

import threading
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


class Hold:
    """Blocks the file operation `op` on a file whose name starts with `name` until released;
    notes the threads every operation ran on."""

    def __init__(self, op: str, name: str, wait_s: float = 10.0) -> None:
        self.op, self.name, self.wait_s = op, name, wait_s
        self.entered, self.release = threading.Event(), threading.Event()
        self.threads: dict[tuple[str, str], set[int]] = {}
        self.armed = False

    def __call__(self, op: str, path: Path) -> None:
        self.threads.setdefault((op, path.name), set()).add(threading.get_ident())
        if self.armed and op == self.op and path.name.startswith(self.name):
            self.entered.set()
            assert self.release.wait(self.wait_s), "never released: was the write on the loop?"

    def ran_on(self, op: str, suffix: str) -> set[int]:
        return set().union(*(t for (o, n), t in self.threads.items() if o == op and n.endswith(suffix)))
