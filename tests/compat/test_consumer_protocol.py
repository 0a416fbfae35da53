"""confluent-kafka (librdkafka 2.16) with `group.protocol=consumer`: the broker assigns (KIP-848).

Two members share a topic's partitions, every record is consumed once with commit-after-process,
and when one leaves the other takes its partitions over from the committed offsets; a static member
restarted within its session takes its own partitions back without a rebalance; the group goes on
across a restart of its broker; a classic group with a member upgrades online when a
consumer-protocol member joins and downgrades when it leaves.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from helpers import BrokerProcess, make_messages, unique_topic, wait_until
from helpers.confluent import QUIET, create_topic, produce
from helpers.consumer_protocol import FAST_CONSUMER_GROUPS, ProtocolConsumer, describe_group

pytestmark = pytest.mark.compat

PARTITIONS = 4
PER_PHASE = 200


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("kip848") / "data", env=FAST_CONSUMER_GROUPS)
    b.start()
    yield b
    b.close()


def _split(members: list[ProtocolConsumer], sizes: list[int], topic: str) -> bool:
    for m in members:
        if m.error is not None:
            raise AssertionError(f"{m.name} failed: {m.error!r}")
    owned = [m.assignment() for m in members]
    flat = [p for s in owned for p in s]
    return sorted(len(s) for s in owned) == sizes and sorted(flat) == [(topic, p) for p in range(PARTITIONS)]


def test_two_members_share_and_one_takes_over_when_the_other_leaves(broker: BrokerProcess) -> None:
    topic = unique_topic("kip848")
    group = f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    msgs = make_messages(2 * PER_PHASE, seed=3)
    a = ProtocolConsumer(broker.bootstrap, group, [topic], "a")
    b = ProtocolConsumer(broker.bootstrap, group, [topic], "b")
    everyone = [a, b]
    try:
        wait_until(lambda: _split([a, b], [2, 2], topic), timeout=60,
                   message=lambda: f"two members with two partitions each: {a.assignment()} {b.assignment()}")
        produce(broker.bootstrap, topic, msgs[:PER_PHASE])
        wait_until(lambda: a.count() + b.count() >= PER_PHASE, timeout=60,
                   message=lambda: f"the first {PER_PHASE} records (have {a.count() + b.count()})")
        for m in everyone:  # each read only from the partitions it owns
            assert {(t, p) for t, p, _, _ in m.consumed} <= m.assignment(), m.name
        handed_over = a.assignment()
        a.close()
        wait_until(lambda: _split([b], [PARTITIONS], topic), timeout=60,
                   message=lambda: f"b owns every partition: {b.assignment()}")
        produce(broker.bootstrap, topic, msgs[PER_PHASE:])
        wait_until(lambda: a.count() + b.count() >= 2 * PER_PHASE, timeout=60,
                   message=lambda: f"all {2 * PER_PHASE} records (have {a.count() + b.count()})")
    finally:
        for m in everyone:
            if m.is_alive():
                m.close()
    consumed = [c for m in everyone for c in m.consumed]
    values = Counter(v for _, _, _, v in consumed)
    assert not [v[:8] for v, n in values.items() if n > 1], "records consumed more than once"
    assert set(values) == {m.value for m in msgs}, "records missing"
    assert any((t, p) in handed_over for t, p, _, _ in b.consumed), "b did not consume what a handed over"
    assert not a.commit_errors and not b.commit_errors
    check = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **QUIET})
    try:
        committed = check.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    finally:
        check.close()
    per_partition = Counter(p for _, p, _, _ in consumed)
    assert {tp.partition: tp.offset for tp in committed} == {p: per_partition[p] for p in range(PARTITIONS)}


def test_a_regex_subscription_picks_up_a_topic_created_later(broker: BrokerProcess) -> None:
    """librdkafka sends a `^`-subscription as SubscribedTopicRegex; the broker resolves it, and a
    matching topic created while the member runs joins its assignment at a later heartbeat."""
    prefix = unique_topic("kip848re")
    first, second = f"{prefix}-a", f"{prefix}-b"
    create_topic(broker.bootstrap, first, 2)
    m = ProtocolConsumer(broker.bootstrap, f"g-{uuid.uuid4().hex[:8]}", [f"^{prefix}-.*"], "regex")
    try:
        wait_until(lambda: m.assignment() == {(first, 0), (first, 1)}, timeout=60,
                   message=lambda: f"the first topic's partitions: {m.assignment()}")
        create_topic(broker.bootstrap, second, 2)
        produce(broker.bootstrap, second, make_messages(20, seed=5))
        wait_until(lambda: {(first, 0), (first, 1), (second, 0), (second, 1)} == m.assignment() and m.count() >= 20,
                   timeout=60, message=lambda: f"both topics, 20 records: {m.assignment()} {m.count()}")
    finally:
        m.close()
    assert {t for t, _, _, _ in m.consumed} == {second}


def test_a_static_member_restarted_within_its_session_keeps_its_partitions(broker: BrokerProcess) -> None:
    """group.instance.id: closing sends epoch -2 (a static member leaving for a while), so its place
    and partitions are kept for its session; its next incarnation takes them back under a new member
    id, and the group epoch does not move: the other member is never asked to give anything up."""
    topic = unique_topic("kip848st")
    group = f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    a = ProtocolConsumer(broker.bootstrap, group, [topic], "a", **{"group.instance.id": "static-a"})
    b = ProtocolConsumer(broker.bootstrap, group, [topic], "b", **{"group.instance.id": "static-b"})
    a2: ProtocolConsumer | None = None
    try:
        wait_until(lambda: _split([a, b], [2, 2], topic), timeout=60,
                   message=lambda: f"two partitions each: {a.assignment()} {b.assignment()}")
        wait_until(lambda: describe_group(broker.bootstrap, group)["state"] == "Stable", timeout=30,
                   message="the group reconciled")
        before = describe_group(broker.bootstrap, group)
        a_owned, b_owned = a.assignment(), b.assignment()
        mark = len(b.history)
        a.close()
        a2 = ProtocolConsumer(broker.bootstrap, group, [topic], "a2", **{"group.instance.id": "static-a"})
        wait_until(lambda: a2 is not None and a2.assignment() == a_owned, timeout=30,
                   message=lambda: f"the restarted member gets {a_owned} back: {a2.assignment() if a2 else None}")
        produce(broker.bootstrap, topic, make_messages(PER_PHASE, seed=8))
        wait_until(lambda: a2 is not None and a.count() + a2.count() + b.count() >= PER_PHASE, timeout=60,
                   message="every record consumed")
        after = describe_group(broker.bootstrap, group)
    finally:
        for m in (a, b, a2):
            if m is not None and m.is_alive():
                m.close()
    assert b.history[mark - 1:] == [b_owned], f"b's assignment moved: {b.history}"
    assert after["group_epoch"] == before["group_epoch"], (before, after)
    ids = {m["instance_id"]: m for m in after["members"]}
    assert ids["static-a"]["member_id"] != {m["instance_id"]: m for m in before["members"]}["static-a"]["member_id"]
    assert {(t, p) for t, p, _, _ in a2.consumed} <= a_owned and {(t, p) for t, p, _, _ in b.consumed} <= b_owned


@pytest.mark.single_broker
def test_the_group_goes_on_across_a_restart_of_its_broker(tmp_path: Path) -> None:
    """SIGTERM and restart of the coordinator's broker in the middle: the group is read back from
    its records, the members go on at their epochs from the committed offsets, and with
    commit-after-process no record is consumed twice."""
    b = BrokerProcess(tmp_path / "data", env={**FAST_CONSUMER_GROUPS, "KETCH_FLUSH_MESSAGES": "1"})
    b.start()
    topic = unique_topic("kip848rs")
    group = f"g-{uuid.uuid4().hex[:8]}"
    msgs = make_messages(2 * PER_PHASE, seed=9)
    members: list[ProtocolConsumer] = []
    try:
        create_topic(b.bootstrap, topic, PARTITIONS)
        members += [ProtocolConsumer(b.bootstrap, group, [topic], n) for n in ("a", "b")]
        wait_until(lambda: _split(members, [2, 2], topic), timeout=60,
                   message=lambda: f"two partitions each: {[m.assignment() for m in members]}")
        produce(b.bootstrap, topic, msgs[:PER_PHASE])
        wait_until(lambda: sum(m.count() for m in members) >= PER_PHASE, timeout=60,
                   message=lambda: f"the first {PER_PHASE} records (have {sum(m.count() for m in members)})")
        before = describe_group(b.bootstrap, group)
        b.restart()
        produce(b.bootstrap, topic, msgs[PER_PHASE:])
        wait_until(lambda: sum(m.count() for m in members) >= 2 * PER_PHASE and _split(members, [2, 2], topic),
                   timeout=90, message=lambda: f"all {2 * PER_PHASE} records (have {sum(m.count() for m in members)})")
        after = describe_group(b.bootstrap, group)
    finally:
        for m in members:
            if m.is_alive():
                m.close()
        b.close()
    assert after["group_epoch"] >= before["group_epoch"] and \
        {m["member_id"] for m in after["members"]} == {m["member_id"] for m in before["members"]}, (before, after)
    values = Counter(v for m in members for _, _, _, v in m.consumed)
    assert set(values) == {m.value for m in msgs}, "records missing"
    assert not any(m.commit_errors for m in members), [m.commit_errors for m in members]
    assert not [v[:8] for v, n in values.items() if n > 1], "records consumed more than once"


def test_a_classic_group_with_a_member_upgrades_and_downgrades_online(broker: BrokerProcess) -> None:
    """KIP-848's online migration with librdkafka on both sides: a classic consumer (range, eager)
    owns every partition; a `group.protocol=consumer` member joins the same group, which becomes a
    consumer group with the classic member inside it, and they share the partitions; when the
    consumer-protocol member leaves, the group is classic again and the classic member takes
    everything back. Every record once, with commit-after-process."""
    topic = unique_topic("kip848mig")
    group = f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    msgs = make_messages(3 * PER_PHASE // 2, seed=12)
    third = len(msgs) // 3
    classic = ProtocolConsumer(broker.bootstrap, group, [topic], "classic",
                               **{"group.protocol": "classic", "partition.assignment.strategy": "range",
                                  "heartbeat.interval.ms": 500, "session.timeout.ms": 10000})
    modern: ProtocolConsumer | None = None
    try:
        wait_until(lambda: _split([classic], [PARTITIONS], topic), timeout=60,
                   message=lambda: f"the classic member owns everything: {classic.assignment()}")
        assert describe_group(broker.bootstrap, group)["type"] == "classic"
        produce(broker.bootstrap, topic, msgs[:third])
        wait_until(lambda: classic.count() >= third, timeout=60, message="the first records")
        modern = ProtocolConsumer(broker.bootstrap, group, [topic], "modern")
        wait_until(lambda: modern is not None and _split([classic, modern], [2, 2], topic), timeout=60,
                   message=lambda: f"two each: {classic.assignment()} {modern.assignment() if modern else None}")
        upgraded = describe_group(broker.bootstrap, group)
        assert upgraded["type"] == "consumer" and len(upgraded["members"]) == 2, upgraded
        produce(broker.bootstrap, topic, msgs[third:2 * third])
        wait_until(lambda: modern is not None and classic.count() + modern.count() >= 2 * third, timeout=60,
                   message="the second records")
        modern.close()
        wait_until(lambda: _split([classic], [PARTITIONS], topic)
                   and describe_group(broker.bootstrap, group)["type"] == "classic", timeout=60,
                   message=lambda: f"classic again, owning everything: {classic.assignment()}")
        produce(broker.bootstrap, topic, msgs[2 * third:])
        wait_until(lambda: modern is not None and classic.count() + modern.count() >= len(msgs), timeout=60,
                   message="every record")
    finally:
        for m in (classic, modern):
            if m is not None and m.is_alive():
                m.close()
    assert modern is not None
    values = Counter(v for m in (classic, modern) for _, _, _, v in m.consumed)
    assert set(values) == {m.value for m in msgs}, "records missing"
    # an eager classic member's commit that a rebalance refused leaves its records to be read again
    if not classic.commit_errors and not modern.commit_errors:
        assert not [v[:8] for v, n in values.items() if n > 1], "records consumed more than once"
    assert modern.consumed, "the consumer-protocol member consumed nothing"
