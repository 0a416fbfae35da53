"""What a batch-atomic sink task does with what it finds (no Spark, no broker): its marker, the
query's decision record and a prepared transaction left under its transactional id."""

from __future__ import annotations

import pytest

from pipeline.atomic_rules import TaskAction, needs_decision, task_action

B = 7


@pytest.mark.parametrize(("committed", "decided", "kept", "action"), [
    (None, None, False, TaskAction.WRITE),  # a first attempt
    (B - 1, B - 1, False, TaskAction.WRITE),  # the next batch
    (B - 1, B - 1, True, TaskAction.ABORT_AND_WRITE),  # an attempt before this one prepared, undecided
    (None, None, True, TaskAction.ABORT_AND_WRITE),
    (B - 1, B, True, TaskAction.HAND_OVER),  # decided, this task's part not committed yet: the driver will
    (None, B, True, TaskAction.HAND_OVER),
    (B, B, False, TaskAction.SKIP),  # decided and this task's part committed
    (B, None, False, TaskAction.SKIP),  # committed in per-task mode (a query switching modes)
    (B, B, True, TaskAction.SKIP),  # committed; whatever is open is not this batch's: left alone
    (B - 1, B, False, TaskAction.LOST),  # decided, neither committed nor prepared: someone aborted it
])
def test_a_task_acts_on_its_marker_the_decision_and_what_it_kept(
        committed: int | None, decided: int | None, kept: bool, action: TaskAction) -> None:
    assert task_action(B, committed=committed, decided=decided, kept=kept) is action


def test_the_driver_records_a_decision_once_per_batch() -> None:
    assert needs_decision(None, 0)
    assert needs_decision(B - 1, B)
    assert not needs_decision(B, B)  # a replay of a decided batch: the decision stands
