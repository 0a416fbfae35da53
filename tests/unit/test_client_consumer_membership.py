"""The bundled Consumer's KIP-848 membership (client/consumer_membership.py), step by step: what each
heartbeat carries, revocation before assignment, fenced -> told -> rejoin, and how it leaves."""

from __future__ import annotations

import uuid

from client.consumer_membership import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerMembership,
    HeartbeatOutcome,
    Phase,
    Step,
)
from protocol.errors import ErrorCode

T = uuid.UUID(int=7)
P0, P1, P2, P3 = ((T, i) for i in range(4))


def joined(owned: frozenset[tuple[uuid.UUID, int]] = frozenset(), epoch: int = 3,
           instance_id: str | None = None) -> ConsumerMembership:
    m = ConsumerMembership(member_id="m", instance_id=instance_id, server_assignor="uniform",
                           rebalance_timeout_ms=60_000)
    m.subscribe(["t"])
    sent = m.heartbeat()
    assert m.on_response(0, epoch, 300, owned, sent) is HeartbeatOutcome.OK
    m.assigned(owned)
    assert m.next_step() is None
    return m


def test_the_join_carries_everything_then_only_changes() -> None:
    m = ConsumerMembership(member_id="m", server_assignor="range", rebalance_timeout_ms=60_000)
    assert not m.wants_heartbeat()  # not subscribed: not in the group
    m.subscribe(["b", "a", "a"])
    assert m.wants_heartbeat() and m.phase is Phase.JOINING
    join = m.heartbeat()
    assert (join.member_epoch, join.rebalance_timeout_ms, join.subscribed_topic_names, join.subscribed_topic_regex,
            join.server_assignor, join.owned) == (0, 60_000, ["a", "b"], None, "range", [])
    assert m.on_response(0, 1, 300, [P0], join) is HeartbeatOutcome.OK
    assert (m.epoch, m.heartbeat_interval_ms, m.target) == (1, 300, frozenset({P0}))
    later = m.heartbeat()
    assert (later.member_epoch, later.rebalance_timeout_ms, later.subscribed_topic_names, later.server_assignor,
            later.owned) == (1, -1, None, None, [])  # unchanged: null; owns nothing yet
    m.on_response(0, 1, 300, None, later)  # a null assignment leaves the target as it was
    assert m.target == frozenset({P0})
    m.subscribe([], regex="t.*")
    changed = m.heartbeat()
    assert (changed.subscribed_topic_names, changed.subscribed_topic_regex) == ([], "t.*")
    m.on_response(0, 1, 300, None, changed)
    m.subscribe(["a"])
    cleared = m.heartbeat()
    assert (cleared.subscribed_topic_names, cleared.subscribed_topic_regex) == (["a"], "")  # "" drops the regex


def test_a_subscription_whose_heartbeat_failed_is_sent_again() -> None:
    m = joined()
    m.subscribe(["t", "u"])
    sent = m.heartbeat()
    assert m.on_response(ErrorCode.NOT_COORDINATOR, 0, 0, None, sent) is HeartbeatOutcome.FIND_COORDINATOR
    assert m.heartbeat().subscribed_topic_names == ["t", "u"]
    assert m.on_response(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, 0, 0, None, sent) is HeartbeatOutcome.RETRY
    assert m.epoch == 3  # unchanged


def test_revocation_comes_before_assignment_and_is_acknowledged_by_the_owned_list() -> None:
    m = joined(frozenset({P0, P1}))
    # the new target moves P1 away and brings P2: P1 goes first, P2 only after
    m.on_response(0, 4, 300, [P0, P2], m.heartbeat())
    assert m.next_step() == Step(revoke=frozenset({P1}))
    assert m.heartbeat().owned == [P0, P1]  # still held while the application gives it up
    m.revoked({P1})
    assert m.heartbeat().owned == [P0]  # the acknowledgement
    assert m.next_step() == Step(assign=frozenset({P2}))
    m.assigned({P2})
    assert m.next_step() is None and m.heartbeat().owned == [P0, P2]


def test_a_target_changing_during_a_revocation_is_followed() -> None:
    m = joined(frozenset({P0, P1}))
    m.on_response(0, 3, 300, [P0], m.heartbeat())
    assert m.next_step() == Step(revoke=frozenset({P1}))
    m.on_response(0, 4, 300, [P0, P1, P3], m.heartbeat())  # P1 comes back before the revocation ended
    m.revoked({P1})
    assert m.next_step() == Step(assign=frozenset({P1, P3}))
    m.on_response(0, 5, 300, [P0, P1], m.heartbeat())  # and P3 is gone again before it was taken
    assert m.assigned({P1, P3}) == frozenset({P1})  # only what the current target has
    assert m.owned == frozenset({P0, P1}) and m.next_step() is None


def test_fenced_member_reports_its_partitions_lost_then_rejoins_at_epoch_zero() -> None:
    for code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
        m = joined(frozenset({P0, P1}), epoch=5)
        assert m.on_response(code, 0, 0, None, m.heartbeat()) is HeartbeatOutcome.FENCED
        assert m.phase is Phase.FENCED and not m.wants_heartbeat()  # silent until the application was told
        assert m.lost == frozenset({P0, P1})
        assert m.next_step() is None  # no reconciliation against the old target
        m.rejoin()
        assert m.lost == frozenset() and m.owned == frozenset()
        join = m.heartbeat()
        assert (m.member_id, join.member_epoch, join.owned, join.subscribed_topic_names) == ("m", 0, [], ["t"])
        assert join.rebalance_timeout_ms == 60_000 and join.server_assignor == "uniform"


def test_an_answer_arriving_after_a_fence_changes_nothing() -> None:
    m = joined(frozenset({P0}))
    sent = m.heartbeat()
    m.fence()
    assert m.on_response(0, 9, 300, [P0, P1], sent) is HeartbeatOutcome.OK
    assert m.phase is Phase.FENCED and m.target is None and m.epoch == 3


def test_other_errors_are_fatal() -> None:
    m = joined()
    for code in (ErrorCode.UNSUPPORTED_ASSIGNOR, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                 ErrorCode.UNRELEASED_INSTANCE_ID, ErrorCode.INVALID_REQUEST):
        assert m.on_response(code, 0, 0, None, m.heartbeat()) is HeartbeatOutcome.FATAL


def test_a_static_member_leaves_with_epoch_minus_two_a_dynamic_one_with_minus_one() -> None:
    assert joined(instance_id="i-1").leave_epoch() == STATIC_LEAVE_EPOCH
    assert joined().leave_epoch() == LEAVE_EPOCH
    fenced = joined()
    fenced.fence()
    assert fenced.leave_epoch() is None  # not in the group: nothing to send
    assert ConsumerMembership().leave_epoch() is None
    static = ConsumerMembership(instance_id="i-1")
    static.subscribe(["t"])
    assert static.heartbeat().member_epoch == 0  # a restarted static member joins like any other


def test_unsubscribing_leaves_with_the_next_heartbeat() -> None:
    m = joined(frozenset({P0}))
    m.unsubscribe()
    leave = m.heartbeat()
    assert (leave.member_epoch, leave.owned) == (LEAVE_EPOCH, [])
    m.on_response(0, LEAVE_EPOCH, 0, None, leave)
    assert m.phase is Phase.IDLE and not m.wants_heartbeat()
    m.subscribe(["t"])
    assert m.heartbeat().member_epoch == 0
