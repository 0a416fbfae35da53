"""The decisions of the batch-atomic protocol (atomic.py), apart from its I/O.

A task attempt of micro-batch B finds three things: its marker (the last batch whose output of this
task was committed), the query's decision record (the last batch the driver decided to commit) and,
under its transactional id, possibly a prepared transaction left by an earlier attempt (kept with
KeepPreparedTxn, so nothing has ended it). Once the driver has decided B, every prepared part of B
must be committed, never aborted: some parts may be committed already. Before that, any left
over part may be thrown away and written again.
"""

from __future__ import annotations

from enum import Enum


class TaskAction(Enum):
    WRITE = "write"  # write the task's part of the batch and prepare it
    ABORT_AND_WRITE = "abort and write"  # an undecided earlier attempt's transaction: abort it, then write
    HAND_OVER = "hand over"  # the batch is decided: give the kept transaction to the driver, write nothing
    SKIP = "skip"  # this task's part of the batch is committed already
    LOST = "lost"  # decided, yet neither committed nor prepared: something outside the protocol ended it


def task_action(batch: int, *, committed: int | None, decided: int | None, kept: bool) -> TaskAction:
    """`committed`: the task's marker; `decided`: the query's decision; `kept`: whether a prepared
    transaction was left under the task's transactional id."""
    if committed is not None and committed >= batch:
        return TaskAction.SKIP
    if decided is not None and decided >= batch:
        return TaskAction.HAND_OVER if kept else TaskAction.LOST
    return TaskAction.ABORT_AND_WRITE if kept else TaskAction.WRITE


def needs_decision(decided: int | None, batch: int) -> bool:
    """Whether the driver's commit of `batch` must record its decision (a replay of a decided
    batch finds it recorded)."""
    return decided is None or decided < batch
