"""A simulated disk: `storage.fs.FileSystem` in memory, with what a power loss does to it.

Why: the simulation (issue 26) must crash a broker and restart it on what a real disk would have
kept, and replay that from a seed. So the disk keeps, per file, its durable content (as of its
last sync/datasync) apart from the writes and truncates made since, and per directory its durable
entries apart from the entry changes (create, rename, unlink, mkdir) made since its last fsync.

What is durable when (the strict POSIX reading, the adversarial one; ext4 is kinder):
- a file's data and size: after `sync()`/`datasync()` of any handle to it. Nothing else syncs it.
- a directory entry change: after `fsync_dir` of the directory that gains the name (a create,
  mkdir, or the target of a rename, also across directories) or loses it (an unlink). A file's
  sync does NOT make its own creation durable, and fsyncing the source directory of a rename
  across directories does not make that rename durable.
- fsyncing a directory also makes durable the earlier changes its changes depend on (the
  creation of a file it renames, ...): there is no state where a durable rename moved a file
  that was never created.

`crash(rng)` is a power loss: for each not-yet-durable entry change, in the order they were
made, a coin decides whether it reached the disk (a rename is kept or lost whole: a lost rename
brings the old name back, a lost creation takes the file away, a lost unlink brings the file
back; a change is lost whenever one it depends on is lost, as a journal would). Then for each
file still there, a seeded prefix of its unsynced writes and truncates is kept, the last kept
write possibly torn (only a prefix of its bytes; never garbage or zeros past what was written).
`crash_process()` is a SIGKILL: the page cache survives, nothing is lost. After either, the
handles opened before are dead: every call on them raises OSError(EBADF), as the process that
held them is gone. One SimFileSystem is one machine's disk: give each simulated broker its own,
with its data directories made first and `sync_all()` (a disk prepared before the run: the broker
creates missing log directories without fsyncing their parents, so on this disk a power loss
could take them away whole). `listdir` answers in creation order.

Determinism: no time, ids, global random or iteration over sets; every choice comes from the
`random.Random` handed to `crash`, in an order fixed by what was done (inode numbers, change
sequence numbers, names in creation order). Single-threaded: the simulation runs the broker's
thread work inline.
"""

from __future__ import annotations

import errno
import os
import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from storage.fs import Data, FileStat

SyncFault = Callable[[Path], bool]


def _err(cls: type[OSError], code: int, path: Path | str) -> OSError:
    return cls(code, os.strerror(code), str(path))


class _Change:
    """One directory entry change (a rename is one change over two names, maybe two directories)."""

    __slots__ = ("seq", "owner", "what", "dirs", "deps", "durable", "kept")

    def __init__(self, seq: int, owner: _Dir, what: str, dirs: list[_Dir], deps: list[_Change]) -> None:
        self.seq = seq
        self.owner = owner  # the directory whose fsync makes it durable
        self.what = what  # for crash reports: "create /a/b", "rename /a -> /b"
        self.dirs = dirs
        self.deps = deps  # earlier changes of the same names, not durable when this one was made
        self.durable = False
        self.kept = False  # decided by a crash


class _File:
    __slots__ = ("ino", "data", "durable", "ops", "mtime_ms")

    def __init__(self, ino: int, mtime_ms: int) -> None:
        self.ino = ino
        self.data = bytearray()  # what reads see: the page cache
        self.durable = bytearray()  # as of the last sync
        self.ops: list[tuple[int, bytes] | int] = []  # since: (pos, bytes) writes, int truncates
        self.mtime_ms = mtime_ms

    def change(self, op: tuple[int, bytes] | int) -> None:
        _apply(self.data, op)
        self.ops.append(op)

    def sync(self) -> None:
        """Replays the writes since the last sync on the durable copy: a sync costs what was
        written since, not the file's size."""
        for op in self.ops:
            _apply(self.durable, op)
        self.ops.clear()


class _Dir:
    __slots__ = ("ino", "entries", "base", "pending", "last", "mtime_ms")

    def __init__(self, ino: int, mtime_ms: int) -> None:
        self.ino = ino
        self.entries: dict[str, _Node] = {}  # what lookups see now
        self.base: dict[str, _Node] = {}  # durable
        self.pending: list[_Edit] = []  # entry edits since, in order
        self.last: dict[str, _Change] = {}  # latest not-yet-durable change of each name
        self.mtime_ms = mtime_ms


_Node = _File | _Dir
_Edit = tuple[_Change, str, _Node | None]  # an entry edit: (change, name, node; None: removed)


def _apply_write(buf: bytearray, pos: int, data: bytes) -> None:
    if not data:
        return
    if pos > len(buf):
        buf.extend(bytes(pos - len(buf)))
    buf[pos:pos + len(data)] = data


def _apply_truncate(buf: bytearray, size: int) -> None:
    if size < len(buf):
        del buf[size:]
    else:
        buf.extend(bytes(size - len(buf)))


def _apply(buf: bytearray, op: tuple[int, bytes] | int) -> None:
    if isinstance(op, int):
        _apply_truncate(buf, op)
    else:
        _apply_write(buf, *op)


class SimFile:
    """A handle to a simulated file (storage.fs.File)."""

    __slots__ = ("_fs", "_node", "_path", "_gen", "_read_only", "_closed")

    def __init__(self, fs: SimFileSystem, node: _File, path: Path, read_only: bool) -> None:
        self._fs = fs
        self._node = node
        self._path = path  # as opened: what fail_sync predicates see
        self._gen = fs._gen
        self._read_only = read_only
        self._closed = False

    def _live(self) -> _File:
        if self._closed or self._gen != self._fs._gen:
            raise _err(OSError, errno.EBADF, self._path)
        return self._node

    def _writable(self, code: int) -> _File:
        node = self._live()
        if self._read_only:
            raise _err(OSError, code, self._path)
        node.mtime_ms = self._fs._now()
        return node

    def pwrite(self, data: Data, pos: int) -> None:
        self._writable(errno.EBADF).change((pos, bytes(data)))

    def pwritev(self, parts: Sequence[Data], pos: int) -> int:
        data = b"".join(parts)
        self._writable(errno.EBADF).change((pos, data))
        return len(data)

    def pread(self, size: int, pos: int) -> bytes:
        return bytes(self._live().data[pos:pos + size])

    def size(self) -> int:
        return len(self._live().data)

    def truncate(self, size: int) -> None:
        self._writable(errno.EINVAL).change(size)

    def sync(self) -> None:
        node = self._live()
        self._fs._check_sync(self._path)
        node.sync()

    datasync = sync  # the size is the only metadata the crash model keeps

    def dup(self) -> SimFile:
        node = self._live()
        return SimFile(self._fs, node, self._path, self._read_only)

    def close(self) -> None:
        if self._closed:
            return
        self._live()
        self._closed = True

    def __repr__(self) -> str:
        return f"SimFile({str(self._path)!r})"


class SimFileSystem:
    """A simulated disk (storage.fs.FileSystem); see the module docstring for its crash model.

    `now_ms` gives the modification times `stat` reports (the simulation's clock)."""

    def __init__(self, now_ms: Callable[[], int] | None = None) -> None:
        self._now = now_ms or (lambda: 0)
        self._inos = 0
        self._seq = 0
        self._gen = 0  # handles of an older generation belong to a crashed process
        self._root = _Dir(self._new_ino(), self._now())
        self._sync_faults: list[tuple[SyncFault, int]] = []

    # ---- the FileSystem protocol ---------------------------------------------------------------
    def open(self, path: Path, *, create: bool = False, truncate: bool = False,
             read_only: bool = False) -> SimFile:
        parent, name = self._parent(path)
        node = parent.entries.get(name)
        if node is None:
            if not create:
                raise _err(FileNotFoundError, errno.ENOENT, path)
            node = _File(self._new_ino(), self._now())
            self._change(parent, f"create {path}", [(parent, name, node)])
        elif isinstance(node, _Dir):
            raise _err(IsADirectoryError, errno.EISDIR, path)
        elif truncate and not read_only:
            node.mtime_ms = self._now()
            if node.data:
                node.change(0)
        return SimFile(self, node, path, read_only)

    def read(self, path: Path) -> bytes:
        return bytes(self._file(path).data)

    def stat(self, path: Path) -> FileStat:
        node = self._lookup(path)
        return FileStat(len(node.data) if isinstance(node, _File) else 0, node.mtime_ms)

    def exists(self, path: Path) -> bool:
        try:
            self._lookup(path)
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def listdir(self, path: Path) -> list[str]:
        return list(self._dir(path).entries)

    def rename(self, src: Path, dst: Path) -> None:
        sdir, sname = self._parent(src)
        node = sdir.entries.get(sname)
        if node is None:
            raise _err(FileNotFoundError, errno.ENOENT, src)
        ddir, dname = self._parent(dst)
        if sdir is ddir and sname == dname:
            return
        old = ddir.entries.get(dname)
        if isinstance(node, _Dir):
            if isinstance(old, _File):
                raise _err(NotADirectoryError, errno.ENOTDIR, dst)
            if isinstance(old, _Dir) and old.entries:
                raise _err(OSError, errno.ENOTEMPTY, dst)
            if self._is_within(ddir, node):
                raise _err(OSError, errno.EINVAL, dst)
        elif isinstance(old, _Dir):
            raise _err(IsADirectoryError, errno.EISDIR, dst)
        self._change(ddir, f"rename {src} -> {dst}", [(sdir, sname, None), (ddir, dname, node)])

    def unlink(self, path: Path) -> None:
        try:
            parent, name = self._parent(path)
        except FileNotFoundError:
            return
        node = parent.entries.get(name)
        if node is None:
            return
        if isinstance(node, _Dir):
            raise _err(IsADirectoryError, errno.EISDIR, path)
        self._change(parent, f"unlink {path}", [(parent, name, None)])

    def mkdir(self, path: Path) -> None:
        d = self._root
        at = Path("/")
        for name in self._parts(path):
            at = at / name
            node = d.entries.get(name)
            if node is None:
                node = _Dir(self._new_ino(), self._now())
                self._change(d, f"mkdir {at}", [(d, name, node)])
            elif isinstance(node, _File):
                raise _err(FileExistsError if at == path else NotADirectoryError,
                           errno.EEXIST if at == path else errno.ENOTDIR, at)
            d = node

    def remove_tree(self, path: Path) -> None:
        try:
            parent, name = self._parent(path)
        except (FileNotFoundError, NotADirectoryError):
            return
        node = parent.entries.get(name)
        if not isinstance(node, _Dir):
            return  # missing, or a file: shutil.rmtree(ignore_errors=True) leaves a file alone
        self._empty(node, path)
        self._change(parent, f"rmdir {path}", [(parent, name, None)])

    def fsync_dir(self, path: Path) -> None:
        node = self._lookup(path)
        self._check_sync(path)
        if isinstance(node, _File):
            node.sync()  # what fsync of a descriptor opened on a file does
            return
        touched: dict[int, _Dir] = {node.ino: node}
        for change, _, _ in node.pending:
            if change.owner is node and not change.durable:
                self._make_durable(change, touched)
        for d in touched.values():
            self._fold(d)

    # ---- crashes and faults --------------------------------------------------------------------
    def crash(self, rng: random.Random) -> list[str]:
        """A power loss (see the module docstring). Returns what was lost, one line each."""
        return self._crash(lambda _what: rng.random() < 0.5, rng)

    def crash_worst(self, keep: Callable[[str], bool] = lambda _what: False) -> list[str]:
        """The power loss that loses everything it may: every unsynced write, every entry change
        not fsynced (what is left is what `durable_snapshot` shows) — but the entry changes
        `keep` picks by their description as reports show it ("unlink /a/b"), when what they
        depend on is kept too: a test's one chosen outcome."""
        return self._crash(keep, None)

    def crash_process(self) -> None:
        """SIGKILL: the process's handles die; the page cache, and so every write, survives."""
        self._gen += 1

    def sync_all(self) -> None:
        """What sync(1) does: every file's data and every directory entry durable (a disk set up
        before the simulated run starts)."""
        dirs, files = self._all_nodes(live_only=True)
        for f in files:
            f.sync()
        for d in dirs:
            for change, _, _ in d.pending:
                change.durable = True
                change.deps = []
        for d in dirs:
            self._fold(d)

    def fail_sync(self, predicate: SyncFault, errno: int = errno.EIO) -> Callable[[], None]:
        """From now on sync, datasync and fsync_dir of a matching path raise OSError(errno) (the
        path a file was opened by); what was not durable stays so. Returns the undo."""
        rule = (predicate, errno)
        self._sync_faults.append(rule)
        return lambda: self._sync_faults.remove(rule)

    # ---- inspection ----------------------------------------------------------------------------
    def durable_bytes(self, path: Path) -> bytes:
        """What any crash keeps of the file at `path` (FileNotFoundError: a crash may lose it)."""
        node = self._lookup(path, durable=True)
        if isinstance(node, _Dir):
            raise _err(IsADirectoryError, errno.EISDIR, path)
        return bytes(node.durable)

    def snapshot(self) -> dict[str, bytes | None]:
        """Every path visible now, sorted: a file's content, None for a directory."""
        return dict(self._walk(self._root, Path("/"), durable=False))

    def durable_snapshot(self) -> dict[str, bytes | None]:
        """As `snapshot`, of what any crash keeps."""
        return dict(self._walk(self._root, Path("/"), durable=True))

    # ---- internals -----------------------------------------------------------------------------
    def _new_ino(self) -> int:
        self._inos += 1
        return self._inos

    @staticmethod
    def _parts(path: Path) -> tuple[str, ...]:
        if not path.is_absolute():
            raise ValueError(f"the simulated disk takes absolute paths, not {path}")
        if ".." in path.parts:
            raise ValueError(f"the simulated disk does not resolve '..': {path}")
        return path.parts[1:]

    def _lookup(self, path: Path, *, durable: bool = False) -> _Node:
        node: _Node = self._root
        for name in self._parts(path):
            if isinstance(node, _File):
                raise _err(NotADirectoryError, errno.ENOTDIR, path)
            entry = (node.base if durable else node.entries).get(name)
            if entry is None:
                raise _err(FileNotFoundError, errno.ENOENT, path)
            node = entry
        return node

    def _parent(self, path: Path) -> tuple[_Dir, str]:
        parts = self._parts(path)
        if not parts:
            raise _err(OSError, errno.EBUSY, path)
        parent = self._lookup(path.parent)
        if isinstance(parent, _File):
            raise _err(NotADirectoryError, errno.ENOTDIR, path)
        return parent, parts[-1]

    def _file(self, path: Path) -> _File:
        node = self._lookup(path)
        if isinstance(node, _Dir):
            raise _err(IsADirectoryError, errno.EISDIR, path)
        return node

    def _dir(self, path: Path) -> _Dir:
        node = self._lookup(path)
        if isinstance(node, _File):
            raise _err(NotADirectoryError, errno.ENOTDIR, path)
        return node

    def _is_within(self, d: _Dir, ancestor: _Dir) -> bool:
        """d is `ancestor` or below it (a directory cannot be moved into itself)."""
        stack: list[_Dir] = [ancestor]
        while stack:
            cur = stack.pop()
            if cur is d:
                return True
            stack.extend(n for n in cur.entries.values() if isinstance(n, _Dir))
        return False

    def _empty(self, d: _Dir, path: Path) -> None:
        """Unlink everything below d, one change per entry, as rmtree does."""
        for name, node in list(d.entries.items()):
            if isinstance(node, _Dir):
                self._empty(node, path / name)
            self._change(d, f"{'rmdir' if isinstance(node, _Dir) else 'unlink'} {path / name}",
                         [(d, name, None)])

    def _change(self, owner: _Dir, what: str, edits: list[tuple[_Dir, str, _Node | None]]) -> None:
        deps: list[_Change] = []
        dirs: list[_Dir] = []
        for d, name, _ in edits:
            prev = d.last.get(name)
            if prev is not None and not prev.durable and prev not in deps:
                deps.append(prev)
            if d not in dirs:
                dirs.append(d)
        self._seq += 1
        change = _Change(self._seq, owner, what, dirs, deps)
        now = self._now()
        for d, name, node in edits:
            if node is None:
                del d.entries[name]
            else:
                d.entries[name] = node
            d.pending.append((change, name, node))
            d.last[name] = change
            d.mtime_ms = now

    @staticmethod
    def _make_durable(change: _Change, touched: dict[int, _Dir]) -> None:
        stack = [change]
        while stack:
            c = stack.pop()
            if c.durable:
                continue
            c.durable = True
            stack.extend(c.deps)
            c.deps = []
            for d in c.dirs:
                touched[d.ino] = d

    @staticmethod
    def _fold(d: _Dir) -> None:
        """Move the durable edits into the durable entries. (A durable change never follows a
        not-durable one of the same name: making it durable made its predecessors durable.)"""
        rest: list[_Edit] = []
        for edit in d.pending:
            change, name, node = edit
            if not change.durable:
                rest.append(edit)
            elif node is None:
                d.base.pop(name, None)
            else:
                d.base[name] = node
        d.pending = rest
        for name, change in list(d.last.items()):
            if change.durable:
                del d.last[name]

    def _all_nodes(self, *, live_only: bool) -> tuple[list[_Dir], list[_File]]:
        """Every node reachable now (live_only) or in any state a crash can leave, by inode."""
        dirs: dict[int, _Dir] = {}
        files: dict[int, _File] = {}
        stack: list[_Node] = [self._root]
        while stack:
            node = stack.pop()
            if isinstance(node, _File):
                files[node.ino] = node
                continue
            if node.ino in dirs:
                continue
            dirs[node.ino] = node
            stack.extend(node.entries.values())
            if not live_only:
                stack.extend(node.base.values())
                stack.extend(n for _, _, n in node.pending if n is not None)
        return [dirs[i] for i in sorted(dirs)], [files[i] for i in sorted(files)]

    def _crash(self, keep: Callable[[str], bool], rng: random.Random | None) -> list[str]:
        self._gen += 1
        report: list[str] = []
        dirs, _ = self._all_nodes(live_only=False)
        changes: dict[int, _Change] = {}
        for d in dirs:
            for change, _, _ in d.pending:
                if not change.durable:
                    changes[change.seq] = change
        for seq in sorted(changes):
            change = changes[seq]
            change.kept = all(dep.durable or dep.kept for dep in change.deps) and keep(change.what)
            if not change.kept:
                report.append(f"lost {change.what}")
        for d in dirs:
            entries = dict(d.base)
            for change, name, node in d.pending:
                if change.durable or change.kept:
                    if node is None:
                        entries.pop(name, None)
                    else:
                        entries[name] = node
            d.entries, d.base, d.pending, d.last = entries, dict(entries), [], {}
        _, files = self._all_nodes(live_only=True)
        paths = {ino: p for p, ino in self._file_paths()}
        for f in files:
            lost = self._crash_file(f, rng)
            if lost:
                report.append(f"{paths.get(f.ino, '?')}: {lost}")
        return report

    @staticmethod
    def _crash_file(f: _File, rng: random.Random | None) -> str:
        n = len(f.ops)
        if not n:
            return ""
        keep = rng.randint(0, n) if rng is not None else 0
        ops, f.ops = f.ops[:keep], []
        last = ops[-1] if ops else None
        torn = ""
        if isinstance(last, tuple) and rng is not None and rng.random() < 0.5:
            pos, data = last
            cut = rng.randint(0, len(data))
            torn = f", the last torn after {cut} of {len(data)} bytes"
            ops[-1] = (pos, data[:cut])
        for op in ops:
            _apply(f.durable, op)
        f.data = bytearray(f.durable)
        if keep == n and not torn:
            return ""
        return f"kept {keep} of {n} unsynced writes{torn}"

    def _file_paths(self) -> Iterator[tuple[str, int]]:
        stack: list[tuple[Path, _Dir]] = [(Path("/"), self._root)]
        while stack:
            at, d = stack.pop()
            for name, node in d.entries.items():
                if isinstance(node, _Dir):
                    stack.append((at / name, node))
                else:
                    yield str(at / name), node.ino

    def _walk(self, d: _Dir, at: Path, *, durable: bool) -> Iterator[tuple[str, bytes | None]]:
        entries = d.base if durable else d.entries
        for name in sorted(entries):
            node = entries[name]
            if isinstance(node, _Dir):
                yield str(at / name), None
                yield from self._walk(node, at / name, durable=durable)
            else:
                yield str(at / name), bytes(node.durable if durable else node.data)

    def _check_sync(self, path: Path) -> None:
        for predicate, code in self._sync_faults:
            if predicate(path):
                raise _err(OSError, code, path)
