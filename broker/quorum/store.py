"""The quorum node's durable state on disk: what a Ready says to persist, and what a restart reads.

Three kinds of file in the quorum's directory, each small and single-purpose:
* `quorum-state`: the epoch and the vote cast in it, JSON, replaced atomically (write, fsync,
  rename, fsync the directory) — a vote must survive a crash before the answer leaves;
* `log`: the metadata log from the snapshot on, frames of
  `crc32c u32 | length u32 | offset i64 | epoch i32 | data`, appended and fsynced per Ready; a
  torn or corrupt tail (a crash mid-write) is cut off at load;
* `snapshot-<end offset>-<epoch>`: the applied state below end offset, written atomically; the
  newest valid one wins and older ones are deleted.

Truncation rewrites nothing: the file is cut at the position of the first dropped frame. After a
snapshot the log file is rewritten (atomically) with only the entries after it.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import crc32c

from storage.checkpoint import atomic_write
from storage.fs import OS_FS, FileSystem

from .messages import Entry, Snapshot
from .node import Persisted, Ready

_HEAD = struct.Struct(">II")  # crc32c of the body, length of the body
_BODY = struct.Struct(">qi")  # offset, epoch; the data follows
STATE_FILE = "quorum-state"
LOG_FILE = "log"
SNAPSHOT_PREFIX = "snapshot-"


def _frame(e: Entry) -> bytes:
    body = _BODY.pack(e.offset, e.epoch) + e.data
    return _HEAD.pack(crc32c.crc32c(body), len(body)) + body


class QuorumStore:
    def __init__(self, directory: Path | str, fs: FileSystem = OS_FS) -> None:
        self.fs = fs  # every file operation goes through it (a simulated disk in simulations)
        self.dir = Path(directory)
        self._positions: list[int] = []  # file position of each entry in `log`
        self._offsets: list[int] = []
        self._size = 0

    # ---- load ----------------------------------------------------------------------------------
    def load(self) -> Persisted:
        fs = self.fs
        fs.mkdir(self.dir)
        epoch, voted = 0, None
        state = self.dir / STATE_FILE
        if fs.exists(state):
            raw = json.loads(fs.read(state))
            epoch, voted = int(raw["epoch"]), raw.get("voted_for")
        snapshot = self._load_snapshot()
        start = snapshot.end_offset if snapshot else 0
        entries: list[Entry] = []
        path = self.dir / LOG_FILE
        if not fs.exists(path):
            # The file's directory entry must be durable before any append to it is acknowledged
            # (a power loss could otherwise lose the whole file, fsynced contents and all), and
            # so must the directory's own, new too (with it would go the vote as well).
            fs.fsync_dir(self.dir.parent)
            fs.open(path, create=True).close()
            fs.fsync_dir(self.dir)
        data = fs.read(path)
        pos = 0
        while pos + _HEAD.size <= len(data):
            crc, n = _HEAD.unpack_from(data, pos)
            body = data[pos + _HEAD.size:pos + _HEAD.size + n]
            if n < _BODY.size or len(body) < n or crc32c.crc32c(body) != crc:
                break  # a torn or damaged tail: nothing after it was acknowledged
            offset, ep = _BODY.unpack_from(body)
            expected = entries[-1].offset + 1 if entries else None
            if expected is not None and offset != expected:
                break
            if offset >= start:
                entries.append(Entry(offset, ep, bytes(body[_BODY.size:])))
                self._positions.append(pos)
                self._offsets.append(offset)
            pos += _HEAD.size + n
        if entries and entries[0].offset != start:
            entries, self._positions, self._offsets = [], [], []
            pos = 0
        if pos < len(data):
            f = fs.open(path)
            try:
                f.truncate(pos)
                f.sync()
            finally:
                f.close()
        self._size = pos
        return Persisted(epoch, voted, snapshot, tuple(entries))

    def _load_snapshot(self) -> Snapshot | None:
        best: Snapshot | None = None
        for name in self._snapshot_names():
            try:
                end, epoch = (int(x) for x in name[len(SNAPSHOT_PREFIX):].split("-"))
                raw = self.fs.read(self.dir / name)
                crc, body = struct.unpack(">I", raw[:4])[0], raw[4:]
            except (ValueError, struct.error):
                continue
            if crc32c.crc32c(body) == crc and (best is None or end > best.end_offset):
                best = Snapshot(end, epoch, body)
        return best

    def _snapshot_names(self) -> list[str]:
        return sorted(n for n in self.fs.listdir(self.dir) if n.startswith(SNAPSHOT_PREFIX))

    # ---- persist a Ready -------------------------------------------------------------------------
    def persist(self, ready: Ready) -> None:
        """Make everything the Ready asks for durable; returns only once it is fsynced."""
        if ready.snapshot is not None:
            self._write_snapshot(ready.snapshot)
        if ready.hard_state is not None:
            epoch, voted = ready.hard_state
            atomic_write(self.fs, self.dir / STATE_FILE,
                         json.dumps({"epoch": epoch, "voted_for": voted}).encode())
        if ready.truncate_to is not None or ready.entries:
            f = self.fs.open(self.dir / LOG_FILE, create=True)
            try:
                if ready.truncate_to is not None:
                    keep = sum(1 for o in self._offsets if o < ready.truncate_to)
                    cut = self._positions[keep] if keep < len(self._positions) else self._size
                    f.truncate(cut)
                    del self._positions[keep:], self._offsets[keep:]
                    self._size = cut
                start = self._size
                frames: list[bytes] = []
                for e in ready.entries:
                    if self._offsets and e.offset != self._offsets[-1] + 1:
                        raise ValueError(f"entry {e.offset} does not follow {self._offsets[-1]}")
                    frame = _frame(e)
                    frames.append(frame)
                    self._positions.append(self._size)
                    self._offsets.append(e.offset)
                    self._size += len(frame)
                if frames:
                    f.pwrite(b"".join(frames), start)
                f.sync()
            finally:
                f.close()

    def _write_snapshot(self, snap: Snapshot) -> None:
        name = f"{SNAPSHOT_PREFIX}{snap.end_offset}-{snap.epoch}"
        atomic_write(self.fs, self.dir / name, struct.pack(">I", crc32c.crc32c(snap.data)) + snap.data)
        # the log keeps only what follows the snapshot: rewrite it, then forget older snapshots
        keep = [i for i, o in enumerate(self._offsets) if o >= snap.end_offset]
        log_path = self.dir / LOG_FILE
        data = self.fs.read(log_path) if self.fs.exists(log_path) else b""
        tail = data[self._positions[keep[0]]:self._size] if keep else b""
        atomic_write(self.fs, log_path, tail)
        base = self._positions[keep[0]] if keep else 0
        self._positions = [self._positions[i] - base for i in keep]
        self._offsets = [self._offsets[i] for i in keep]
        self._size = len(tail)
        for other in self._snapshot_names():
            if other != name:
                self.fs.unlink(self.dir / other)
