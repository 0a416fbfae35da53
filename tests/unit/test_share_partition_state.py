"""The share-partition state machine (broker/share/partition_state.py): acquisition, locks,
acknowledgements, the delivery limit, read_committed's bounds, and its durable form."""

from __future__ import annotations

from broker.share.partition_state import (
    Acquired,
    BatchSpan,
    RecordState,
    SharePartitionState,
    StateRun,
)
from protocol.errors import ErrorCode
from protocol.messages.share_fetch import ACCEPT, GAP, REJECT, RELEASE

LOG = [BatchSpan(0, 4), BatchSpan(5, 9)]  # ten records in two batches


def sp(**kw: int) -> SharePartitionState:
    return SharePartitionState(0, lock_ms=1000, delivery_limit=kw.pop("limit", 3), **kw)


def test_a_fetch_acquires_up_to_max_records_and_another_member_gets_the_rest() -> None:
    s = sp()
    assert s.acquire("a", LOG, upper=10, max_records=3, now=0) == [Acquired(0, 2, 1)]
    assert s.next_candidate(0) == 3
    assert s.acquire("b", LOG, upper=10, max_records=100, now=0) == [Acquired(3, 9, 1)]
    assert s.acquire("c", LOG, upper=10, max_records=100, now=0) == []  # nothing left to give
    assert s.acquired_by("a") == [0, 1, 2]


def test_accepted_and_rejected_records_never_come_back_and_the_start_moves_past_them() -> None:
    s = sp()
    s.acquire("a", LOG, upper=10, max_records=10, now=0)
    assert s.acknowledge("a", 0, 4, [ACCEPT]) == ErrorCode.NONE
    assert s.acknowledge("a", 5, 9, [REJECT]) == ErrorCode.NONE
    assert s.start == 10 and not s.records
    assert s.acquire("a", LOG, upper=10, max_records=10, now=5000) == []


def test_released_records_are_delivered_again_with_a_higher_delivery_count() -> None:
    s = sp()
    s.acquire("a", LOG, upper=10, max_records=10, now=0)
    assert s.acknowledge("a", 2, 3, [RELEASE]) == ErrorCode.NONE
    assert s.records[2].state is RecordState.AVAILABLE
    assert s.next_candidate(0) == 2
    assert s.acquire("b", LOG, upper=10, max_records=10, now=0) == [Acquired(2, 3, 2)]


def test_a_lock_that_runs_out_makes_the_records_available_to_anyone() -> None:
    s = sp()
    s.acquire("a", LOG, upper=10, max_records=2, now=0)
    assert s.next_deadline() == 1000
    assert s.expire(999) == 0
    assert s.expire(1000) == 2
    assert s.acquire("b", LOG, upper=10, max_records=2, now=1000) == [Acquired(0, 1, 2)]
    # the first member's late acknowledgement is refused: the records are not its any more
    assert s.acknowledge("a", 0, 1, [ACCEPT]) == ErrorCode.INVALID_RECORD_STATE
    assert s.records[0].member == "b"


def test_records_delivered_delivery_limit_times_are_archived_on_release_or_timeout() -> None:
    s = sp(limit=2)
    batch = [BatchSpan(0, 1)]
    s.acquire("a", batch, upper=2, max_records=2, now=0)
    s.acknowledge("a", 0, 1, [RELEASE])
    assert s.acquire("a", batch, upper=2, max_records=2, now=0) == [Acquired(0, 1, 2)]
    assert s.acknowledge("a", 0, 0, [RELEASE]) == ErrorCode.NONE  # second delivery released: the limit
    assert s.expire(10_000) == 1  # the other one's lock runs out at the limit too
    assert s.start == 2 and not s.records  # both archived, never delivered again
    assert s.acquire("b", batch, upper=2, max_records=2, now=10_000) == []


def test_an_acknowledgement_of_records_not_acquired_by_the_member_changes_nothing() -> None:
    s = sp()
    s.acquire("a", LOG, upper=10, max_records=3, now=0)
    assert s.acknowledge("b", 0, 2, [ACCEPT]) == ErrorCode.INVALID_RECORD_STATE
    assert s.acknowledge("a", 1, 3, [ACCEPT]) == ErrorCode.INVALID_RECORD_STATE  # 3 never acquired
    assert [s.records[o].state for o in range(3)] == [RecordState.ACQUIRED] * 3
    assert s.acknowledge("a", 0, 2, [ACCEPT, RELEASE]) == ErrorCode.INVALID_REQUEST  # types do not match


def test_per_offset_types_and_gaps() -> None:
    s = sp()
    s.acquire("a", LOG, upper=10, max_records=4, now=0)
    assert s.acknowledge("a", 0, 3, [ACCEPT, GAP, RELEASE, REJECT]) == ErrorCode.NONE
    assert s.start == 2
    assert s.records[2].state is RecordState.AVAILABLE and s.records[3].state is RecordState.ARCHIVED


def test_a_member_that_goes_gives_back_what_it_held() -> None:
    s = sp()
    s.acquire("a", LOG, upper=10, max_records=4, now=0)
    s.acquire("b", LOG, upper=10, max_records=2, now=0)
    assert s.release_member("a") == 4
    assert s.acquired_by("b") == [4, 5]
    assert s.acquire("c", LOG, upper=10, max_records=10, now=0) == [Acquired(0, 3, 2), Acquired(6, 9, 1)]


def test_nothing_at_or_past_the_upper_bound_is_acquired() -> None:
    # read_committed: the last stable offset is the bound, an open transaction's records wait
    s = sp()
    assert s.acquire("a", LOG, upper=6, max_records=100, now=0) == [Acquired(0, 5, 1)]
    assert s.next_offset == 6
    assert s.acquire("a", LOG, upper=10, max_records=100, now=0) == [Acquired(6, 9, 1)]


def test_aborted_transactions_and_control_batches_are_archived_not_delivered() -> None:
    s = sp()
    log = [BatchSpan(0, 1), BatchSpan(2, 3, producer_id=7, transactional=True),
           BatchSpan(4, 4, producer_id=7, transactional=True, control=True),  # the abort marker
           BatchSpan(5, 6, producer_id=8, transactional=True),
           BatchSpan(7, 7, producer_id=8, transactional=True, control=True)]  # a commit marker
    got = s.acquire("a", log, upper=8, max_records=100, now=0, aborted=[(7, 2)])
    assert got == [Acquired(0, 1, 1), Acquired(5, 6, 1)]
    s.acknowledge("a", 0, 1, [ACCEPT])
    s.acknowledge("a", 5, 6, [ACCEPT])
    assert s.start == 8 and not s.records


def test_the_in_flight_window_is_bounded() -> None:
    s = sp(max_in_flight=4)
    assert s.acquire("a", LOG, upper=10, max_records=100, now=0) == [Acquired(0, 3, 1)]
    assert s.next_candidate(0) is None
    s.acknowledge("a", 0, 1, [ACCEPT])
    assert s.acquire("b", LOG, upper=10, max_records=100, now=0) == [Acquired(4, 5, 1)]


def test_the_durable_form_keeps_counts_and_finished_records_and_forgets_locks() -> None:
    s = sp()
    s.acquire("a", LOG, upper=10, max_records=10, now=0)
    s.acknowledge("a", 0, 0, [RELEASE])
    s.acknowledge("a", 1, 2, [ACCEPT])
    s.acknowledge("a", 3, 3, [REJECT])
    start, runs = s.snapshot()
    assert start == 0
    assert runs[:3] == [StateRun(0, 0, 0, 1), StateRun(1, 2, 2, 1), StateRun(3, 3, 4, 1)]
    assert runs[3] == StateRun(4, 9, 0, 1)  # acquired, written as available with its count
    back = sp()
    back.restore(start, runs)
    assert back.next_offset == 10
    assert back.acquire("b", LOG, upper=10, max_records=100, now=0) == [Acquired(0, 0, 2), Acquired(4, 9, 2)]
