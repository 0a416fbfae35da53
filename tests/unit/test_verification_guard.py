"""The partition side of KIP-890 verification (Kafka's VerificationGuard): a transactional batch
verified while its transaction was open must not land after that transaction's marker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.partition import AppendOrigin, Partition
from broker.partition.replica_state import Assignment
from protocol.clock import ManualClock
from protocol.errors import ErrorCode, KafkaError
from protocol.records import Record, build_batch, build_control_batch
from storage.config import LogConfig

PID, EPOCH = 42, 3


def _txn_batch(seq: int) -> bytes:
    return build_batch([Record(0, 0, None, b"v%d" % seq)], producer_id=PID, producer_epoch=EPOCH,
                       base_sequence=seq, transactional=True)


@pytest.fixture
def part(tmp_path: Path) -> Iterator[Partition]:
    p = Partition.open(tmp_path, "t", 0, LogConfig(), 1, ManualClock(1_000))
    p.become_leader(Assignment((1,), frozenset({1}), 1, 0, 0))
    yield p
    p.close()


def test_a_marker_between_the_verdict_and_the_append_refuses_the_late_batch(part: Partition) -> None:
    guard = part.start_verification(PID)
    # ... the coordinator says yes; before the append, the transaction is aborted and marked here:
    part.append(build_control_batch(PID, EPOCH, False, 0, 1_000), AppendOrigin.COORDINATOR)
    with pytest.raises(KafkaError) as e:
        part.append(_txn_batch(0), AppendOrigin.CLIENT, transactional=True, guard=guard)
    assert e.value.code == ErrorCode.INVALID_TXN_STATE
    assert part.log_end_offset == 1  # only the marker: no transaction left open by a zombie
    assert part.last_stable_offset == part.log_end_offset


def test_a_guard_still_held_lets_the_batch_open_the_transaction_and_shared_checks_pass(part: Partition) -> None:
    first = part.start_verification(PID)
    second = part.start_verification(PID)  # a pipelined request checked at the same time
    assert first is second
    part.append(_txn_batch(0), AppendOrigin.CLIENT, transactional=True, guard=first)
    # The transaction is open here now: the second batch needs no guard any more.
    part.append(_txn_batch(1), AppendOrigin.CLIENT, transactional=True, guard=second)
    entry = part.producer(PID)
    assert entry is not None and entry.current_txn_first_offset == 0
    assert part.log_end_offset == 2


def test_a_new_check_after_the_marker_gets_a_new_guard(part: Partition) -> None:
    old = part.start_verification(PID)
    part.append(build_control_batch(PID, EPOCH, True, 0, 1_000), AppendOrigin.COORDINATOR)
    new = part.start_verification(PID)
    assert new is not old
    part.append(_txn_batch(0), AppendOrigin.CLIENT, transactional=True, guard=new)
    assert part.log_end_offset == 2


def test_a_later_sequence_cannot_open_the_transaction_before_the_earliest_one_being_verified(part: Partition) -> None:
    """Kafka's VerificationStateEntry.lowestSequence: batch 0's check failed retriably (the
    coordinator was busy) and it will be sent again; batch 1, pipelined behind it, passed its
    check. Appended first, batch 1 would be the producer's first batch here (any sequence goes),
    and batch 0's retry would be refused OUT_OF_ORDER_SEQUENCE_NUMBER, which ends the
    transaction. Refused instead, batch 1 is retried by the client once batch 0 has landed."""
    part.start_verification(PID, EPOCH, 0)  # batch 0: checked, answered NOT_ENOUGH_REPLICAS, not appended
    second = part.start_verification(PID, EPOCH, 1)
    with pytest.raises(KafkaError) as e:
        part.append(_txn_batch(1), AppendOrigin.CLIENT, transactional=True, guard=second)
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert part.log_end_offset == 0
    retry = part.start_verification(PID, EPOCH, 0)
    part.append(_txn_batch(0), AppendOrigin.CLIENT, transactional=True, guard=retry)
    part.append(_txn_batch(1), AppendOrigin.CLIENT, transactional=True, guard=part.start_verification(PID, EPOCH, 1))
    assert part.log_end_offset == 2


def test_the_earliest_sequence_being_verified_starts_over_with_a_new_epoch(part: Partition) -> None:
    part.start_verification(PID, EPOCH, 5)  # a check of the old epoch that never led to an append
    guard = part.start_verification(PID, EPOCH + 1, 0)
    part.append(build_batch([Record(0, 0, None, b"v")], producer_id=PID, producer_epoch=EPOCH + 1, base_sequence=0,
                            transactional=True), AppendOrigin.CLIENT, transactional=True, guard=guard)
    assert part.log_end_offset == 1
