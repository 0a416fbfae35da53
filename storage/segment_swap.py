"""Replacing a run of segments by rewritten ones, so that a crash at any moment leaves either the
old segments or the new ones on disk, never a mix and never neither.

The cleaner writes the new segments, under their final names, into a staging directory inside
the partition directory and fsyncs them (files and directory). Then:

1. commit: a manifest file, `cleaner-swap`, is written atomically and durably. It lists
   (new base, old base) for every old segment a new segment replaces. Before the manifest exists
   nothing outside the staging directory has changed; once it exists the swap will be finished.
2. install, per new segment: delete the old segments it replaces other than the one sharing its
   base, then rename the staged files over the old ones of that base (so each file is old or
   new, never missing). The order inside this step does not matter for safety — once the
   manifest exists recovery repeats the whole step — but deleting first keeps a crash from ever
   showing a new segment next to an old one it overlaps.
3. fsync the partition directory, remove the staging directory, delete the manifest, fsync again.

`recover` runs when a partition is opened, before its segments are listed: with a readable
manifest it repeats step 2 and 3 (every step is idempotent: a staged file that is gone was moved
already, an old file that is gone was deleted already); without one it deletes the staging
directory, which rolls the interrupted cleaning back. This is Kafka's .cleaned/.swap scheme
reshaped: Kafka works out which old segments a .swap file replaces from the offsets it holds,
which a compacted segment that lost its last batches cannot tell reliably; an explicit list can.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import structlog

from .checkpoint import CheckpointFile
from .fs import FileSystem

log = structlog.get_logger(__name__)

STAGING_DIR = "cleaner-staging"
MANIFEST_FILE = "cleaner-swap"
_INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")
_LOG_SUFFIX = ".log"

# (base offset of the new segment, base offsets of the old segments it replaces, in order)
SwapGroup = tuple[int, Sequence[int]]
# Called with the name of each step about to happen; tests raise from it to simulate a crash.
FaultHook = Callable[[str], None]


def staging_dir(directory: Path) -> Path:
    return directory / STAGING_DIR


def _name(base: int) -> str:
    return f"{base:020d}"


def _manifest(fs: FileSystem, directory: Path) -> CheckpointFile:
    return CheckpointFile(fs, directory / MANIFEST_FILE, 2)


def _no_fault(_step: str) -> None:
    return None


def commit(fs: FileSystem, directory: Path, groups: Sequence[SwapGroup], fault: FaultHook | None = None) -> None:
    """Swap the staged segments in for the old ones (the staged files must be fsynced already)."""
    hook = fault or _no_fault
    for new_base, olds in groups:
        if not olds or olds[0] != new_base:
            raise ValueError(f"segment {new_base} must replace a run starting at its own base, not {olds}")
    hook("before-manifest")
    fs.fsync_dir(staging_dir(directory))
    _manifest(fs, directory).write([(new, old) for new, olds in groups for old in olds], durable=True)
    _install(fs, directory, groups, hook)


def recover(fs: FileSystem, directory: Path) -> bool:
    """Finish a swap whose manifest is on disk, or roll back one that never got that far.

    Returns whether a swap was finished (for the log's recovery report).
    """
    manifest = _manifest(fs, directory)
    entries = manifest.read() if fs.exists(manifest.path) else []
    if not entries:
        fs.unlink(manifest.path)
        if fs.exists(staging_dir(directory)):
            log.info("rolling back an interrupted log cleaning", directory=str(directory))
            fs.remove_tree(staging_dir(directory))
        return False
    groups: dict[int, list[int]] = {}
    for new_base, old_base in entries:
        groups.setdefault(new_base, []).append(old_base)
    log.info("finishing an interrupted segment swap", directory=str(directory), segments=sorted(groups))
    _install(fs, directory, list(groups.items()), _no_fault)
    return True


def _install(fs: FileSystem, directory: Path, groups: Sequence[SwapGroup], hook: FaultHook) -> None:
    staged = staging_dir(directory)
    for new_base, olds in groups:
        name = _name(new_base)
        for old in olds:
            if old == new_base:
                continue
            hook(f"delete-old-{old}")
            fs.unlink(directory / (_name(old) + _LOG_SUFFIX))
            for suffix in _INDEX_SUFFIXES:
                fs.unlink(directory / (_name(old) + suffix))
        for suffix in (*_INDEX_SUFFIXES, _LOG_SUFFIX):
            src = staged / (name + suffix)
            if fs.exists(src):
                hook(f"move-{name}{suffix}")
                fs.rename(src, directory / (name + suffix))
    hook("before-dir-fsync")
    fs.fsync_dir(directory)
    hook("before-cleanup")
    fs.remove_tree(staged)
    hook("before-manifest-delete")
    fs.unlink(directory / MANIFEST_FILE)
    fs.fsync_dir(directory)
