"""Tidying a streaming checkpoint before a restart.

Spark writes its offset and commit logs through a temporary file that it renames into place, so a
driver killed mid-write leaves a `.N.<uuid>.tmp` file (and its `.crc`) behind. That is harmless
except in one case: a kill while writing batch 0's offsets. Spark 4 then refuses to restart a
stateful query ("checkpoint location ... offsets should be empty on batch 0"), taking the leftover
for a sign that the directory belongs to another query. A temporary file was never renamed, so
it never took effect: deleting it (while no driver uses the checkpoint) loses nothing.
"""

from __future__ import annotations

from pathlib import Path

LOGS = ("offsets", "commits")


def remove_incomplete_writes(query_checkpoint: Path) -> list[Path]:
    """Delete unrenamed temporary files of the offset and commit logs; returns what was deleted.
    Call only when no query runs on this checkpoint."""
    removed = []
    for log in LOGS:
        d = query_checkpoint / log
        if not d.is_dir():
            continue
        for f in d.iterdir():
            if f.name.startswith(".") and (f.name.endswith(".tmp") or f.name.endswith(".tmp.crc")):
                f.unlink(missing_ok=True)
                removed.append(f)
    return removed
