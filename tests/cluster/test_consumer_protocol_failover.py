"""A KIP-848 consumer group (confluent-kafka, `group.protocol=consumer`) on three brokers survives
a SIGKILL of its coordinator's broker: the group moves with its `__consumer_offsets` partition and
goes on from its records (the same group epoch, the committed offsets), and `ketch group describe`
shows its members, epochs and assignments on the new coordinator."""

from __future__ import annotations

from collections import Counter

from helpers import Cluster, make_messages
from helpers.cluster_metadata import SHORT_SESSION, coordinator, listed_everywhere, new_topic, voters_for
from helpers.confluent import produce
from helpers.consumer_protocol import FAST_CONSUMER_GROUPS, ProtocolConsumer, describe_group
from helpers.wait import wait_until

PARTITIONS = 4
PER_PHASE = 150


def describe(c: Cluster, group: str, node: int) -> dict:  # type: ignore[type-arg]
    return describe_group(f"127.0.0.1:{c.ports[node]}", group)


def test_consumer_group_goes_on_after_its_coordinator_is_killed(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env={**SHORT_SESSION, **FAST_CONSUMER_GROUPS})
    listed_everywhere(c)
    topic = "kip848-failover"
    new_topic(c, topic, PARTITIONS, 3)
    wait_until(lambda: coordinator(c.ports[1], "probe", 0) > 0, timeout=30, message="a group coordinator")
    group = "kip848-group"
    x = coordinator(c.ports[1], group, 0)
    live = next(n for n in c.node_ids if n != x)
    msgs = make_messages(2 * PER_PHASE, seed=11)
    a = ProtocolConsumer(c.bootstrap, group, [topic], "a")
    b = ProtocolConsumer(c.bootstrap, group, [topic], "b")
    members = [a, b]
    try:
        def split() -> bool:
            owned = [m.assignment() for m in members]
            return sorted(len(s) for s in owned) == [2, 2] and len(owned[0] | owned[1]) == PARTITIONS

        wait_until(split, timeout=60, message=lambda: f"two partitions each: {a.assignment()} {b.assignment()}")
        # a third member comes and goes: the group epoch is 4 now, past what a group rebuilt from
        # nothing after the kill would reach with two members
        third = ProtocolConsumer(c.bootstrap, group, [topic], "third")
        wait_until(lambda: bool(third.assignment()), timeout=60, message="the third member gets a partition")
        third.close()
        wait_until(split, timeout=60, message=lambda: f"two again: {a.assignment()} {b.assignment()}")
        produce(c.bootstrap, topic, msgs[:PER_PHASE])
        wait_until(lambda: a.count() + b.count() >= PER_PHASE, timeout=60,
                   message=lambda: f"the first {PER_PHASE} records (have {a.count() + b.count()})")
        before = describe(c, group, live)
        assert before["type"] == "consumer" and before["state"] == "Stable", before
        assert sorted(m["epoch"] for m in before["members"]) == [before["group_epoch"]] * 2
        assert all(m["assignment"] == m["target"] and m["assignment"].count(topic) == 2 for m in before["members"])

        c.kill(x)
        wait_until(lambda: coordinator(c.ports[live], group, 0) not in (x, -1), timeout=30,
                   message="the group's partition to move off the killed broker")
        produce(c.bootstrap, topic, msgs[PER_PHASE:])
        wait_until(lambda: a.count() + b.count() >= 2 * PER_PHASE and split(), timeout=90,
                   message=lambda: f"all {2 * PER_PHASE} records (have {a.count() + b.count()}) and both members")
        after = describe(c, group, live)
        # read back from its records: the members kept their epochs (a group rebuilt from nothing
        # would be at epoch 2 again)
        assert after["group_epoch"] >= before["group_epoch"] >= 4 and after["state"] == "Stable", (before, after)
        assert {m["member_id"] for m in after["members"]} == {m["member_id"] for m in before["members"]}
    finally:
        for m in members:
            m.close()
    values = Counter(v for m in members for _, _, _, v in m.consumed)
    assert set(values) == {m.value for m in msgs}, "records missing"
    if not a.commit_errors and not b.commit_errors:  # a commit the kill interrupted may be read again
        assert not [v[:8] for v, n in values.items() if n > 1], "records consumed more than once"
