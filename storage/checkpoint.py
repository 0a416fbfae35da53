"""Small state files written atomically: recovery point, log start, leader epochs, high watermark.

Text, like Kafka's checkpoint files, so an operator can read and fix them with an editor:

    <version>\\n<count>\\n<entry>\\n...     each entry: integers separated by one space

A reader that finds a missing, short or unparsable file returns an empty list and logs why. Every
file here is an optimisation or a bound that the log can re-derive or fall back from (no recovery
point = re-validate everything; no log start = first segment's base), so "corrupt" must never stop
a partition from opening.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import structlog

from .fs import FileSystem

log = structlog.get_logger(__name__)

TMP_SUFFIX = ".tmp"

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"  # see storage/cleaner.py


def atomic_write(fs: FileSystem, path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data` so that a reader sees either the old or the new content.

    durable=False still gives atomicity against a process crash (rename is atomic) but skips the
    two fsyncs; callers use it on hot paths for files whose loss or corruption only costs work
    on restart (a producer snapshot at roll, an epoch entry that recovery can re-derive).
    """
    tmp = path.with_name(path.name + TMP_SUFFIX)
    f = fs.open(tmp, create=True, truncate=True)
    try:
        f.pwrite(data, 0)
        if durable:
            f.sync()
    finally:
        f.close()
    fs.rename(tmp, path)
    if durable:
        fs.fsync_dir(path.parent)


class CheckpointFile:
    """One versioned checkpoint file whose entries are tuples of `arity` integers."""

    VERSION = 0

    def __init__(self, fs: FileSystem, path: Path, arity: int) -> None:
        self.fs = fs
        self.path = path
        self.arity = arity

    def write(self, entries: Sequence[tuple[int, ...]], *, durable: bool = True) -> None:
        lines = [str(self.VERSION), str(len(entries))]
        for entry in entries:
            if len(entry) != self.arity:
                raise ValueError(f"{self.path.name}: entry {entry} does not have {self.arity} fields")
            lines.append(" ".join(str(int(v)) for v in entry))
        atomic_write(self.fs, self.path, ("\n".join(lines) + "\n").encode("ascii"), durable=durable)

    def read(self) -> list[tuple[int, ...]]:
        try:
            text = self.fs.read(self.path).decode("ascii")
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as e:
            log.warning("checkpoint unreadable, treated as empty", file=str(self.path), reason=str(e))
            return []
        lines = text.splitlines()
        try:
            if len(lines) < 2:
                raise ValueError("missing version or count line")
            version = int(lines[0])
            if version != self.VERSION:
                raise ValueError(f"unsupported version {version}")
            count = int(lines[1])
            if count < 0 or len(lines) - 2 != count:
                raise ValueError(f"count {count} but {len(lines) - 2} entries")
            entries: list[tuple[int, ...]] = []
            for line in lines[2:]:
                fields = tuple(int(v) for v in line.split(" "))
                if len(fields) != self.arity:
                    raise ValueError(f"entry {line!r} does not have {self.arity} fields")
                entries.append(fields)
            return entries
        except ValueError as e:
            log.warning("checkpoint corrupt, treated as empty", file=str(self.path), reason=str(e))
            return []


class OffsetCheckpoint:
    """A checkpoint holding one offset (one partition per directory, so one entry)."""

    def __init__(self, fs: FileSystem, path: Path) -> None:
        self._file = CheckpointFile(fs, path, 1)
        self.path = path

    def read(self) -> int | None:
        entries = self._file.read()
        if not entries:
            return None
        if len(entries) != 1 or entries[0][0] < 0:
            log.warning("checkpoint holds an unexpected offset list, ignored", file=str(self.path),
                        entries=entries)
            return None
        return entries[0][0]

    def write(self, offset: int, *, durable: bool = True) -> None:
        self._file.write([(offset,)], durable=durable)
