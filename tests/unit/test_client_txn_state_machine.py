"""The transactional producer's state machine, driven without a broker."""

from __future__ import annotations

import pytest

from client.errors import FatalError, IllegalStateError, ProducerFencedError, TransactionAbortableError
from client.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition
from client.transactions import Outcome, ProducerTxnState, TransactionManager
from protocol.errors import ErrorCode as E

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def ready() -> TransactionManager:
    tm = TransactionManager("tx", 10_000)
    req = tm.begin_init()
    assert req.transactional_id == "tx" and req.transaction_timeout_ms == 10_000
    assert tm.state is ProducerTxnState.INITIALIZING
    assert tm.handle_init(0, 42, 3).outcome is Outcome.DONE
    assert (tm.state, tm.producer_id, tm.producer_epoch) == (ProducerTxnState.READY, 42, 3)
    return tm


def in_txn_with(*tps: TopicPartition) -> TransactionManager:
    tm = ready()
    tm.begin()
    for tp in tps:
        tm.add_partition(tp)
    if tps:
        req = tm.take_partitions_to_add()
        assert req is not None
        assert tm.handle_add_partitions({tp: 0 for tp in tps}).outcome is Outcome.DONE
    return tm


@pytest.mark.parametrize(("code", "outcome"), [
    (E.NOT_COORDINATOR, Outcome.FIND_COORDINATOR),
    (E.COORDINATOR_NOT_AVAILABLE, Outcome.FIND_COORDINATOR),
    (E.COORDINATOR_LOAD_IN_PROGRESS, Outcome.RETRY),
    (E.CONCURRENT_TRANSACTIONS, Outcome.RETRY),
    (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Outcome.FAILED),
])
def test_init_error_mapping(code: E, outcome: Outcome) -> None:
    tm = TransactionManager("tx")
    tm.begin_init()
    d = tm.handle_init(code, -1, -1)
    assert d.outcome is outcome
    if outcome is Outcome.FAILED:
        assert tm.state is ProducerTxnState.FATAL_ERROR and isinstance(d.error, FatalError)
    else:
        assert tm.state is ProducerTxnState.INITIALIZING


def test_full_commit_cycle_and_partitions_added_before_send() -> None:
    tm = ready()
    with pytest.raises(IllegalStateError):
        tm.add_partition(TP0)  # not in a transaction
    tm.begin()
    assert tm.state is ProducerTxnState.IN_TRANSACTION
    tm.add_partition(TP0)
    tm.add_partition(TP1)
    assert not tm.is_sendable(TP0)
    req = tm.take_partitions_to_add()
    assert req is not None and req.v3_and_below_producer_id == 42 and req.v3_and_below_producer_epoch == 3
    assert [(t.name, t.partitions) for t in req.v3_and_below_topics] == [("t", [0, 1])]
    assert tm.take_partitions_to_add() is None  # nothing new while the request is in flight
    tm.add_partition(TP0)  # already pending: not added twice
    assert not tm.has_partitions_to_add
    assert tm.handle_add_partitions({TP0: 0, TP1: 0}).outcome is Outcome.DONE
    assert tm.is_sendable(TP0) and tm.is_sendable(TP1)
    assert tm.begin_commit() is True
    assert tm.state is ProducerTxnState.COMMITTING_TRANSACTION
    end = tm.end_txn_request()
    assert end.committed is True and end.producer_epoch == 3
    assert tm.handle_end_txn(E.CONCURRENT_TRANSACTIONS).outcome is Outcome.RETRY
    assert tm.handle_end_txn(0).outcome is Outcome.DONE
    assert tm.state is ProducerTxnState.READY and not tm.is_sendable(TP0)


def test_empty_transaction_needs_no_end_txn() -> None:
    tm = ready()
    tm.begin()
    assert tm.begin_commit() is False
    tm.complete()
    assert tm.state is ProducerTxnState.READY


def test_end_txn_v5_epoch_bump_is_adopted() -> None:
    tm = in_txn_with(TP0)
    tm.begin_commit()
    tm.handle_end_txn(0, 42, 4)
    assert tm.producer_epoch == 4


def test_add_partitions_retriable_codes_keep_the_request_pending() -> None:
    tm = ready()
    tm.begin()
    tm.add_partition(TP0)
    tm.take_partitions_to_add()
    assert tm.handle_add_partitions({TP0: E.CONCURRENT_TRANSACTIONS}).outcome is Outcome.RETRY
    assert tm.handle_add_partitions({TP0: E.NOT_COORDINATOR}).outcome is Outcome.FIND_COORDINATOR
    assert tm.add_partitions_request().v3_and_below_topics[0].partitions == [0]  # resent as is
    assert tm.handle_add_partitions({TP0: 0}).outcome is Outcome.DONE


def test_topic_authorization_failure_is_abortable_then_abort_recovers() -> None:
    tm = ready()
    tm.begin()
    tm.add_partition(TP0)
    tm.add_partition(TP1)
    tm.take_partitions_to_add()
    d = tm.handle_add_partitions({TP0: E.TOPIC_AUTHORIZATION_FAILED, TP1: E.OPERATION_NOT_ATTEMPTED})
    assert d.outcome is Outcome.FAILED and isinstance(d.error, TransactionAbortableError)
    assert tm.state is ProducerTxnState.ABORTABLE_ERROR
    with pytest.raises(TransactionAbortableError):
        tm.begin_commit()
    with pytest.raises(TransactionAbortableError):
        tm.add_partition(TP0)
    assert tm.begin_abort() is False  # nothing reached the coordinator
    tm.complete()
    assert tm.state is ProducerTxnState.READY and tm.last_error is None
    tm.begin()


@pytest.mark.parametrize("code", [E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH])
def test_fenced_is_fatal_everywhere(code: E) -> None:
    tm = in_txn_with(TP0)
    d = tm.handle_add_partitions({TP1: code})
    assert isinstance(d.error, ProducerFencedError)
    assert tm.state is ProducerTxnState.FATAL_ERROR
    for call in (tm.begin, tm.begin_commit, tm.begin_abort, tm.begin_init):
        with pytest.raises(ProducerFencedError):
            call()


def test_fenced_end_txn_and_produce() -> None:
    tm = in_txn_with(TP0)
    tm.begin_commit()
    d = tm.handle_end_txn(E.PRODUCER_FENCED)
    assert isinstance(d.error, ProducerFencedError) and tm.state is ProducerTxnState.FATAL_ERROR
    tm2 = in_txn_with(TP0)
    err = tm2.on_produce_error(E.INVALID_PRODUCER_EPOCH, TP0)
    assert isinstance(err, ProducerFencedError) and tm2.state is ProducerTxnState.FATAL_ERROR


def test_failed_produce_makes_the_transaction_abortable() -> None:
    tm = in_txn_with(TP0)
    err = tm.on_produce_error(E.MESSAGE_TOO_LARGE, TP0)
    assert tm.state is ProducerTxnState.ABORTABLE_ERROR and err.code is E.MESSAGE_TOO_LARGE
    assert tm.begin_abort() is True
    assert tm.end_txn_request().committed is False
    # EndTxn before v5 keeps the epoch, but the failed batch left a gap in TP0's sequences: the
    # producer must bump the epoch (KIP-360) before the next transaction
    assert tm.handle_end_txn(0).outcome is Outcome.DONE and tm.state is ProducerTxnState.INITIALIZING
    bump = tm.bump_request()
    assert (bump.transactional_id, bump.producer_id, bump.producer_epoch) == ("tx", 42, 3)
    assert tm.handle_init(0, 42, 4).outcome is Outcome.DONE
    assert (tm.state, tm.producer_epoch, tm.epoch_bump_required) == (ProducerTxnState.READY, 4, False)


@pytest.mark.parametrize("code", [E.INVALID_TXN_STATE, E.UNSUPPORTED_FOR_MESSAGE_FORMAT])
def test_a_produce_refused_by_the_transaction_check_is_abortable_as_in_java(code: E) -> None:
    """INVALID_TXN_STATE on a Produce is the partition leader's KIP-890 check saying no: the
    transaction cannot commit, but the producer can abort and go on (Java fails the producer
    only for authorization, fencing, unsupported versions and an unknown producer id). A stalled
    coordinator back with its old state gives that answer (simulation seed 3532), and treating
    it as fatal killed the application."""
    tm = in_txn_with(TP0)
    err = tm.on_produce_error(code, TP0)
    assert tm.state is ProducerTxnState.ABORTABLE_ERROR and err.code is code
    assert tm.begin_abort() is True


def test_end_txn_v5_bump_makes_a_separate_bump_unnecessary() -> None:
    tm = in_txn_with(TP0)
    tm.on_produce_error(E.OUT_OF_ORDER_SEQUENCE_NUMBER, TP0)
    assert tm.state is ProducerTxnState.ABORTABLE_ERROR and tm.epoch_bump_required
    tm.begin_abort()
    assert tm.handle_end_txn(0, 42, 4).outcome is Outcome.DONE
    assert (tm.state, tm.producer_epoch, tm.epoch_bump_required) == (ProducerTxnState.READY, 4, False)


def test_committed_transaction_needs_no_bump() -> None:
    tm = in_txn_with(TP0)
    assert tm.begin_commit() is True
    assert tm.handle_end_txn(0).outcome is Outcome.DONE and tm.state is ProducerTxnState.READY


def test_offsets_flow_and_group_fencing_is_abortable() -> None:
    tm = in_txn_with()
    group = ConsumerGroupMetadata("g", 7, "member-1", None)
    req = tm.begin_add_offsets(group)
    assert req.group_id == "g"
    assert tm.handle_add_offsets(E.COORDINATOR_LOAD_IN_PROGRESS).outcome is Outcome.RETRY
    assert tm.handle_add_offsets(0).outcome is Outcome.DONE
    assert tm.transaction_started
    commit = tm.txn_offset_commit_request({TP1: OffsetAndMetadata(10), TP0: OffsetAndMetadata(5, "m")}, group)
    assert (commit.generation_id, commit.member_id) == (7, "member-1")
    assert [(p.partition_index, p.committed_offset) for p in commit.topics[0].partitions] == [(0, 5), (1, 10)]
    assert tm.handle_txn_offset_commit({TP0: E.NOT_COORDINATOR}).outcome is Outcome.FIND_COORDINATOR
    d = tm.handle_txn_offset_commit({TP0: E.ILLEGAL_GENERATION})
    assert isinstance(d.error, TransactionAbortableError) and tm.state is ProducerTxnState.ABORTABLE_ERROR


@pytest.mark.parametrize(("code", "state"), [(E.TRANSACTION_ABORTABLE, ProducerTxnState.ABORTABLE_ERROR),
                                             (E.INVALID_TXN_STATE, ProducerTxnState.FATAL_ERROR)])
def test_an_offset_commit_refused_abortable_leaves_the_producer_alive(code: E, state: ProducerTxnState) -> None:
    """As Java's TxnOffsetCommitHandler: TRANSACTION_ABORTABLE (what a v4 client is told when
    its transaction is not the coordinator's ongoing one, KIP-1050) ends the transaction, and
    INVALID_TXN_STATE the producer (simulation seed 3975)."""
    tm = in_txn_with()
    group = ConsumerGroupMetadata("g", 7, "member-1", None)
    tm.begin_add_offsets(group)
    assert tm.handle_add_offsets(0).outcome is Outcome.DONE
    tm.txn_offset_commit_request({TP0: OffsetAndMetadata(5)}, group)
    tm.handle_txn_offset_commit({TP0: code})
    assert tm.state is state
    if state is ProducerTxnState.ABORTABLE_ERROR:
        tm.begin_abort()
        assert tm.state is ProducerTxnState.ABORTING_TRANSACTION


def test_invalid_transitions_are_refused() -> None:
    tm = TransactionManager("tx")
    with pytest.raises(IllegalStateError):
        tm.begin()
    with pytest.raises(IllegalStateError):
        tm.begin_commit()
    with pytest.raises(IllegalStateError):
        tm.begin_abort()
    tm = ready()
    with pytest.raises(IllegalStateError):
        tm.begin_commit()
    tm.begin()
    with pytest.raises(IllegalStateError):
        tm.begin()
