"""A FileSystem that delegates to another (the real one by default) and records every call, so a
test can see what storage did to its files, or fail one operation to stand in for a crash."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from storage.fs import OS_FS, Data, File, FileStat, FileSystem

# Called with (operation, path) before the operation runs; raise from it to fail that operation.
Fault = Callable[[str, Path], None]


class RecordingFileSystem:
    def __init__(self, inner: FileSystem = OS_FS, fault: Fault | None = None) -> None:
        self.inner = inner
        self.fault = fault
        self.calls: list[tuple[str, Path]] = []

    def note(self, op: str, path: Path) -> None:
        self.calls.append((op, path))
        if self.fault is not None:
            self.fault(op, path)

    def ops(self, path: Path) -> list[str]:
        """The operations done on `path`, in order."""
        return [op for op, p in self.calls if p == path]

    def open(self, path: Path, *, create: bool = False, truncate: bool = False,
             read_only: bool = False) -> File:
        self.note("create" if create else "open", path)
        return RecordingFile(self, path, self.inner.open(path, create=create, truncate=truncate,
                                                         read_only=read_only))

    def read(self, path: Path) -> bytes:
        self.note("read", path)
        return self.inner.read(path)

    def stat(self, path: Path) -> FileStat:
        self.note("stat", path)
        return self.inner.stat(path)

    def exists(self, path: Path) -> bool:
        self.note("exists", path)
        return self.inner.exists(path)

    def listdir(self, path: Path) -> list[str]:
        self.note("listdir", path)
        return self.inner.listdir(path)

    def rename(self, src: Path, dst: Path) -> None:
        self.note("rename", src)
        self.note("renamed-to", dst)
        self.inner.rename(src, dst)

    def unlink(self, path: Path) -> None:
        self.note("unlink", path)
        self.inner.unlink(path)

    def mkdir(self, path: Path) -> None:
        self.note("mkdir", path)
        self.inner.mkdir(path)

    def remove_tree(self, path: Path) -> None:
        self.note("remove_tree", path)
        self.inner.remove_tree(path)

    def fsync_dir(self, path: Path) -> None:
        self.note("fsync_dir", path)
        self.inner.fsync_dir(path)


class RecordingFile:
    def __init__(self, fs: RecordingFileSystem, path: Path, inner: File) -> None:
        self.fs = fs
        self.path = path
        self.inner = inner

    def pwrite(self, data: Data, pos: int) -> None:
        self.fs.note("pwrite", self.path)
        self.inner.pwrite(data, pos)

    def pwritev(self, parts: Sequence[Data], pos: int) -> int:
        self.fs.note("pwritev", self.path)
        return self.inner.pwritev(parts, pos)

    def pread(self, size: int, pos: int) -> bytes:
        self.fs.note("pread", self.path)
        return self.inner.pread(size, pos)

    def size(self) -> int:
        self.fs.note("size", self.path)
        return self.inner.size()

    def truncate(self, size: int) -> None:
        self.fs.note("truncate", self.path)
        self.inner.truncate(size)

    def sync(self) -> None:
        self.fs.note("sync", self.path)
        self.inner.sync()

    def datasync(self) -> None:
        self.fs.note("datasync", self.path)
        self.inner.datasync()

    def dup(self) -> File:
        self.fs.note("dup", self.path)
        return RecordingFile(self.fs, self.path, self.inner.dup())

    def close(self) -> None:
        self.fs.note("close", self.path)
        self.inner.close()
