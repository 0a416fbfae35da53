"""ConsumerProtocol bytes (checked against kafka-python's schema-generated codec and aiokafka's v0
structs) and the range / cooperative-sticky assignors."""

from __future__ import annotations

from collections import Counter

import pytest
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from client.assignors import (
    Assignment,
    CooperativeStickyAssignor,
    RangeAssignor,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    sticky_target,
)
from client.structs import TopicPartition as TP


def test_subscription_v3_bytes_equal_kafka_schema_encoding() -> None:
    ours = encode_subscription(Subscription(("a", "b"), (TP("a", 0), TP("a", 2)), 5))
    theirs = ConsumerProtocolSubscription(
        version=3, topics=["a", "b"], user_data=None,
        owned_partitions=[ConsumerProtocolSubscription.TopicPartition(topic="a", partitions=[0, 2])],
        generation_id=5, rack_id=None).encode()
    assert ours == theirs


def test_subscription_decodes_other_clients_bytes() -> None:
    v0 = ConsumerProtocolMemberMetadata(version=0, subscription=["x", "y"], user_data=b"").encode()
    s = decode_subscription(v0)
    assert s.topics == ("x", "y") and s.owned_partitions == () and s.generation_id == -1
    # a v1 subscription with Java's cooperative-sticky user data (the generation as int32)
    v1 = ConsumerProtocolSubscription(
        version=1, topics=["x"], user_data=(7).to_bytes(4, "big"),
        owned_partitions=[ConsumerProtocolSubscription.TopicPartition(topic="x", partitions=[1])]).encode(version=1)
    s = decode_subscription(v1)
    assert s.owned_partitions == (TP("x", 1),) and s.generation_id == 7


def test_assignment_round_trips_with_other_decoders() -> None:
    data = encode_assignment(Assignment((TP("b", 1), TP("a", 0), TP("a", 3))))
    aio = ConsumerProtocolMemberAssignment.decode(data)
    assert sorted(aio.partitions()) == [("a", 0), ("a", 3), ("b", 1)]
    kp = ConsumerProtocolAssignment.decode(data)
    assert {(t.topic, p) for t in kp.assigned_partitions for p in t.partitions} == {("a", 0), ("a", 3), ("b", 1)}
    theirs = ConsumerProtocolMemberAssignment(0, [("t", [2, 0])], b"").encode()
    assert set(decode_assignment(theirs).partitions) == {TP("t", 0), TP("t", 2)}
    assert decode_assignment(b"").partitions == ()


def test_range_matches_javas_contiguous_ranges() -> None:
    members = {m: Subscription(("t",)) for m in ("c1", "c0", "c2")}
    out = RangeAssignor().assign({"t": 7}, members)
    assert out == {
        "c0": [TP("t", 0), TP("t", 1), TP("t", 2)],
        "c1": [TP("t", 3), TP("t", 4)],
        "c2": [TP("t", 5), TP("t", 6)],
    }


def test_range_only_assigns_subscribed_topics() -> None:
    members = {"a": Subscription(("t", "u")), "b": Subscription(("t",))}
    out = RangeAssignor().assign({"t": 2, "u": 3}, members)
    assert out["a"] == [TP("t", 0), TP("u", 0), TP("u", 1), TP("u", 2)]
    assert out["b"] == [TP("t", 1)]


def _check_balanced(target: dict[str, list[TP]], n: int) -> None:
    all_tps = [tp for tps in target.values() for tp in tps]
    assert len(all_tps) == n and len(set(all_tps)) == n
    sizes = [len(v) for v in target.values()]
    assert max(sizes) - min(sizes) <= 1


def test_sticky_first_assignment_is_balanced() -> None:
    members = {f"m{i}": Subscription(("t",)) for i in range(3)}
    out = CooperativeStickyAssignor().assign({"t": 10}, members)
    _check_balanced(out, 10)


def test_cooperative_sticky_keeps_partitions_and_withholds_moving_ones() -> None:
    # m0 owns everything; m1 joins. The target gives m1 half, but this round m1 gets nothing that
    # m0 still owns: m0 revokes first, and the next round hands the partitions over.
    owned = tuple(TP("t", p) for p in range(6))
    members = {"m0": Subscription(("t",), owned, 1), "m1": Subscription(("t",))}
    target, owner = sticky_target({"t": 6}, members)
    _check_balanced(target, 6)
    assert set(target["m0"]) <= set(owned) and len(target["m0"]) == 3  # kept 3, gave up 3
    out = CooperativeStickyAssignor().assign({"t": 6}, members)
    assert out["m1"] == [] and out["m0"] == target["m0"]
    # second round: m0 now owns only its three
    members2 = {"m0": Subscription(("t",), tuple(out["m0"]), 2), "m1": Subscription(("t",), (), 2)}
    out2 = CooperativeStickyAssignor().assign({"t": 6}, members2)
    assert out2["m0"] == out["m0"]
    assert sorted(out2["m1"]) == sorted(set(owned) - set(out["m0"]))


def test_sticky_higher_generation_wins_a_double_claim_and_dead_topics_are_dropped() -> None:
    members = {
        "a": Subscription(("t",), (TP("t", 0), TP("gone", 0)), 3),
        "b": Subscription(("t",), (TP("t", 0), TP("t", 1)), 2),
    }
    target, owner = sticky_target({"t": 2}, members)
    assert owner[TP("t", 0)] == "a" and owner[TP("t", 1)] == "b"
    assert target == {"a": [TP("t", 0)], "b": [TP("t", 1)]}


@pytest.mark.parametrize("n_members", [1, 2, 3, 5, 8])
def test_sticky_moves_the_minimum_when_a_member_leaves(n_members: int) -> None:
    members = {f"m{i}": Subscription(("t", "u")) for i in range(n_members)}
    first, _ = sticky_target({"t": 12, "u": 5}, members)
    _check_balanced(first, 17)
    if n_members == 1:
        return
    gone = "m0"
    rest = {m: Subscription(("t", "u"), tuple(first[m]), 1) for m in members if m != gone}
    second, _ = sticky_target({"t": 12, "u": 5}, rest)
    _check_balanced(second, 17)
    for m in rest:  # survivors keep everything they had
        assert set(first[m]) <= set(second[m])
    moved = Counter(m for m, tps in second.items() for tp in tps if tp not in first[m])
    assert sum(moved.values()) == len(first[gone])
