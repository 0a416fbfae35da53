"""The bundled ShareConsumer's sans-IO state (client/share_state.py): heartbeat epochs, share-session
epochs, and the acknowledgements owed, step by step."""

from __future__ import annotations

import uuid

from client.share_state import (
    AckBatch,
    Acknowledgements,
    AcknowledgeType,
    HeartbeatOutcome,
    ShareMembership,
    ShareSession,
    acquired_offsets,
    batches_of,
)
from client.structs import TopicPartition
from protocol.errors import ErrorCode

T = uuid.UUID(int=7)
TP = TopicPartition("t", 0)


# ---- membership --------------------------------------------------------------------------------
def test_join_sends_the_subscription_then_only_changes_of_it() -> None:
    m = ShareMembership(member_id="m")
    m.subscribe(["b", "a", "a"])
    assert m.request_fields() == (0, ["a", "b"])
    assert m.on_response(0, 3, 300, [(T, 0)], ["a", "b"]) is HeartbeatOutcome.OK
    assert (m.epoch, m.assignment, m.heartbeat_interval_ms) == (3, frozenset({(T, 0)}), 300)
    assert m.request_fields() == (3, None)  # unchanged: null
    m.on_response(0, 3, 300, None, None)  # a null assignment leaves it as it was
    assert m.assignment == frozenset({(T, 0)})
    m.subscribe(["a"])
    assert m.request_fields() == (3, ["a"])


def test_a_subscription_whose_heartbeat_failed_is_sent_again() -> None:
    m = ShareMembership(member_id="m")
    m.subscribe(["a"])
    m.on_response(0, 1, 300, [], ["a"])
    m.subscribe(["a", "b"])
    assert m.on_response(ErrorCode.NOT_COORDINATOR, 0, 0, None, ["a", "b"]) is HeartbeatOutcome.FIND_COORDINATOR
    assert m.request_fields() == (1, ["a", "b"])


def test_a_fenced_member_rejoins_at_epoch_zero_with_its_id_owning_nothing() -> None:
    m = ShareMembership(member_id="m")
    m.subscribe(["a"])
    m.on_response(0, 4, 300, [(T, 0)], ["a"])
    assert m.on_response(ErrorCode.FENCED_MEMBER_EPOCH, 0, 0, None, None) is HeartbeatOutcome.REJOIN
    assert (m.member_id, m.epoch, m.assignment) == ("m", 0, frozenset())
    assert m.request_fields() == (0, ["a"])
    assert m.on_response(ErrorCode.UNKNOWN_MEMBER_ID, 0, 0, None, None) is HeartbeatOutcome.REJOIN


def test_heartbeat_errors_are_sorted_as_kafka_does() -> None:
    m = ShareMembership(member_id="m")
    assert m.on_response(ErrorCode.COORDINATOR_NOT_AVAILABLE, 0, 0, None, None) is HeartbeatOutcome.FIND_COORDINATOR
    assert m.on_response(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, 0, 0, None, None) is HeartbeatOutcome.RETRY
    assert m.on_response(ErrorCode.GROUP_AUTHORIZATION_FAILED, 0, 0, None, None) is HeartbeatOutcome.FATAL
    assert m.on_response(ErrorCode.GROUP_MAX_SIZE_REACHED, 0, 0, None, None) is HeartbeatOutcome.FATAL


# ---- sessions ----------------------------------------------------------------------------------
def test_a_session_opens_at_zero_then_counts_up_listing_only_what_changed() -> None:
    s = ShareSession()
    a, b = (T, 0), (T, 1)
    assert s.plan([a, b]) == (0, [a, b], [])
    assert s.answered(0, [a, b])
    assert s.open and s.plan([a, b]) == (1, [], [])
    assert s.answered(0)
    assert s.plan([b]) == (2, [], [a])
    assert s.answered(0, [], [a])
    assert s.partitions == {b} and s.plan([a, b]) == (3, [a], [])


def test_a_session_the_broker_lost_or_an_unanswered_request_starts_over() -> None:
    s = ShareSession()
    s.answered(0, [(T, 0)])
    s.answered(0)
    assert not s.answered(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    assert s.plan([(T, 0)]) == (0, [(T, 0)], [])
    s.answered(0, [(T, 0)])
    assert not s.answered(ErrorCode.SHARE_SESSION_NOT_FOUND)
    assert not s.open
    s.answered(0, [(T, 0)])
    s.lost()  # the connection went with the request: where the broker is, nobody knows
    assert s.plan([(T, 0)])[0] == 0


def test_a_request_refused_for_another_reason_leaves_the_epoch() -> None:
    s = ShareSession()
    s.answered(0, [(T, 0)])
    assert s.answered(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    assert s.plan([(T, 0)])[0] == 1


def test_the_epoch_wraps_to_one() -> None:
    s = ShareSession(epoch=0x7FFFFFFF, partitions={(T, 0)})
    s.answered(0)
    assert s.epoch == 1


# ---- acknowledgements --------------------------------------------------------------------------
def test_batches_are_runs_of_consecutive_offsets_with_one_type_when_they_agree() -> None:
    assert batches_of({5: 1, 3: 1, 4: 1, 9: 2}) == [AckBatch(3, 5, (1,)), AckBatch(9, 9, (2,))]
    assert batches_of({1: 1, 2: 3, 3: 1}) == [AckBatch(1, 3, (1, 3, 1))]
    assert batches_of({}) == []


def test_only_records_handed_out_may_be_acknowledged_and_only_once() -> None:
    acks = Acknowledgements()
    acks.handed_out(TP, [10, 11, 12])
    assert acks.acknowledge(TP, 11, AcknowledgeType.REJECT)
    assert not acks.acknowledge(TP, 11, AcknowledgeType.ACCEPT)
    assert not acks.acknowledge(TP, 13, AcknowledgeType.ACCEPT)
    assert acks.acknowledge(TP, 10, AcknowledgeType.RELEASE)
    assert acks.delivered == {TP: {12}}
    assert acks.take([TP]) == {TP: [AckBatch(10, 11, (2, 3))]}
    assert acks.take([TP]) == {}  # sent: not pending any more


def test_implicit_mode_accepts_everything_handed_out_and_gaps_go_with_it() -> None:
    acks = Acknowledgements()
    acks.handed_out(TP, [1, 2, 4])
    acks.gaps(TP, [3])
    acks.accept_delivered()
    assert acks.delivered == {}
    assert acks.take([TP, TopicPartition("t", 1)]) == {TP: [AckBatch(1, 4, (1, 1, 0, 1))]}


def test_forgotten_partitions_owe_nothing() -> None:
    acks = Acknowledgements()
    acks.handed_out(TP, [1])
    acks.acknowledge(TP, 1, AcknowledgeType.ACCEPT)
    acks.handed_out(TP, [2])
    acks.forget([TP])
    assert acks.take([TP]) == {} and acks.delivered == {}


def test_acquired_ranges_give_each_offset_its_delivery_count() -> None:
    assert acquired_offsets([(3, 4, 1), (7, 7, 2)]) == {3: 1, 4: 1, 7: 2}
