"""The file system storage runs on: every open, write, read, sync, rename and unlink of the log
engine (and of the metadata log's store) goes through one `FileSystem`, injected from the top.

Why a seam: the deterministic simulation (issue 26) gives the broker a simulated disk that keeps
each file's unsynced writes apart and, at a simulated crash, keeps, drops or tears them per file
and per write, loses renames and creations whose directory was not fsynced, and can make a sync
slow or fail. For that, the code must say *which* file it syncs and when, so files are objects
(`File`), not raw descriptors, and every directory change goes through the same object that
later learns whether the directory was fsynced. A test (tests/unit/test_storage_fs_routing.py)
keeps storage from calling `os`/`pathlib` file operations directly; the code always names the
file system `fs`.

Why this shape: the append (`pwritev`), read (`pread`) and fetch paths run per request, so the
production `OsFile` is a thin slotted wrapper, one method call over `os.*` with no allocation,
lock or logging of its own. Errors are the `OSError`s the OS raises; a simulated file system
raises the same ones.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

Data = bytes | bytearray | memoryview


class FileStat(NamedTuple):
    size: int
    mtime_ms: int  # last modification, for time retention of segments without timestamps


class File(Protocol):
    """One open file. Positional I/O only: nothing depends on a shared file position."""

    def pwrite(self, data: Data, pos: int) -> None:
        """Write all of `data` at `pos` (looping over short writes)."""
        ...

    def pwritev(self, parts: Sequence[Data], pos: int) -> int:
        """Write `parts` back to back at `pos` in one gathered write; returns the bytes written,
        which can be fewer than all (the caller knows the total and finishes with pwrite: adding
        them up here would cost every append)."""
        ...

    def pread(self, size: int, pos: int) -> bytes:
        """Up to `size` bytes at `pos`; fewer only at the end of the file."""
        ...

    def size(self) -> int: ...

    def truncate(self, size: int) -> None: ...

    def sync(self) -> None:
        """fsync: data and metadata (size) on disk."""
        ...

    def datasync(self) -> None:
        """fdatasync: data on disk, and the size if it changed; not the timestamps."""
        ...

    def dup(self) -> File:
        """An independent handle to the same open file, closed on its own: a sync or a cleaner
        pass on another thread keeps its file even if the segment closes meanwhile."""
        ...

    def close(self) -> None:
        """Release the handle (again is a no-op)."""
        ...


class FileSystem(Protocol):
    def open(self, path: Path, *, create: bool = False, truncate: bool = False,
             read_only: bool = False) -> File:
        """Open for reading and writing (or reading only). Missing and not `create`:
        FileNotFoundError. `truncate` empties it."""
        ...

    def read(self, path: Path) -> bytes:
        """The whole file (small files: indexes, checkpoints, snapshots). Missing: FileNotFoundError."""
        ...

    def stat(self, path: Path) -> FileStat:
        """Missing: FileNotFoundError."""
        ...

    def exists(self, path: Path) -> bool: ...

    def listdir(self, path: Path) -> list[str]:
        """Names in the directory, in no particular order. Missing: FileNotFoundError."""
        ...

    def rename(self, src: Path, dst: Path) -> None:
        """Atomically move `src` to `dst`, replacing `dst` if it exists (durable only once the
        directory is fsynced). Missing `src`: FileNotFoundError."""
        ...

    def unlink(self, path: Path) -> None:
        """Remove the file; a missing one is not an error (every caller is cleaning up)."""
        ...

    def mkdir(self, path: Path) -> None:
        """Create the directory and any missing parents; an existing one is fine."""
        ...

    def remove_tree(self, path: Path) -> None:
        """Remove the directory and everything in it; a missing one is fine."""
        ...

    def fsync_dir(self, path: Path) -> None:
        """Make creations, renames and unlinks in the directory durable (POSIX needs this)."""
        ...


class OsFile:
    """A file descriptor of the real file system."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def pwrite(self, data: Data, pos: int) -> None:
        n = os.pwrite(self._fd, data, pos)
        if n < len(data):  # rare (signals, quotas): finish it
            view = memoryview(data)[n:]
            pos += n
            while view:
                n = os.pwrite(self._fd, view, pos)
                view = view[n:]
                pos += n

    def pwritev(self, parts: Sequence[Data], pos: int) -> int:
        return os.pwritev(self._fd, parts, pos)

    def pread(self, size: int, pos: int) -> bytes:
        return os.pread(self._fd, size, pos)

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)

    def sync(self) -> None:
        os.fsync(self._fd)

    def datasync(self) -> None:
        os.fdatasync(self._fd)

    def dup(self) -> OsFile:
        return OsFile(os.dup(self._fd))

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __repr__(self) -> str:
        return f"OsFile({self._fd})"


class OsFileSystem:
    """The real file system (files created 0o644)."""

    __slots__ = ()

    def open(self, path: Path, *, create: bool = False, truncate: bool = False,
             read_only: bool = False) -> OsFile:
        flags = os.O_RDONLY if read_only else os.O_RDWR
        if create:
            flags |= os.O_CREAT
        if truncate:
            flags |= os.O_TRUNC
        return OsFile(os.open(path, flags, 0o644))

    def read(self, path: Path) -> bytes:
        return path.read_bytes()

    def stat(self, path: Path) -> FileStat:
        st = os.stat(path)
        return FileStat(st.st_size, st.st_mtime_ns // 1_000_000)

    def exists(self, path: Path) -> bool:
        return path.exists()

    def listdir(self, path: Path) -> list[str]:
        return os.listdir(path)

    def rename(self, src: Path, dst: Path) -> None:
        os.replace(src, dst)

    def unlink(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def mkdir(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)

    def remove_tree(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def fsync_dir(self, path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


OS_FS: FileSystem = OsFileSystem()


def mkdir_durable(fs: FileSystem, path: Path) -> None:
    """`fs.mkdir(path)`, and each directory it had to create made durable in its parent: a data
    directory created at first start and lost to a power cut takes every log written in it along
    (found by the simulated disk, tests/helpers/dst/disk.py)."""
    missing = []
    at = path
    while not fs.exists(at) and at != at.parent:
        missing.append(at)
        at = at.parent
    fs.mkdir(path)
    for created in reversed(missing):
        fs.fsync_dir(created.parent)
