"""librdkafka issue 5511, the hang tests/cluster/test_txn_failover.py used to tolerate: a producer
cached broker X as its group's coordinator; X dies; while X is fenced, Metadata leaves it out (as
Kafka's does) and librdkafka decommissions X — and its next send_offsets_to_transaction waits for a
state change of X's connection, which never comes, ignoring its own timeout. Nothing a broker may
answer avoids it; the copier's producers (tests/helpers/soak.py) close idle connections after 10 s,
and any connection's state change re-drives the stuck lookup. This test holds that workaround to
its word on three real brokers: the call returns (its result or an error) instead of hanging.
"""

from __future__ import annotations

import threading

from confluent_kafka import Consumer, Producer, TopicPartition
from helpers.cluster import Cluster
from helpers.cluster_metadata import SHORT_SESSION, coordinator, listed_everywhere, new_topic, voters_for
from helpers.confluent import QUIET
from helpers.soak import IDLE_CLOSE, NO_REBOOTSTRAP
from helpers.wait import wait_until

RETURNS_WITHIN_S = 45.0  # the call's own timeout (10 s) plus one idle close (10 s), with room for load


def test_send_offsets_returns_after_its_cached_group_coordinator_was_decommissioned(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env=SHORT_SESSION)
    listed_everywhere(c)
    new_topic(c, "dec-in", 1, 3)
    layout = new_topic(c, "dec-out", 1, 3)
    out_leader = layout.partitions[0][1]
    tid = "dec-txn"
    wait_until(lambda: coordinator(c.ports[out_leader], tid, 1) > 0, timeout=30, message="a transaction coordinator")
    txn_node = coordinator(c.ports[out_leader], tid, 1)
    wait_until(lambda: coordinator(c.ports[out_leader], "probe", 0) > 0, timeout=30, message="a group coordinator")
    # X: the group's coordinator, neither the transaction's coordinator nor the output's leader, so
    # that nothing else this producer needs goes away with it.
    group = next(g for g in (f"dec-group-{i}" for i in range(500))
                 if coordinator(c.ports[out_leader], g, 0) not in (txn_node, out_leader, -1))
    x = coordinator(c.ports[out_leader], group, 0)
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid, **NO_REBOOTSTRAP, **IDLE_CLOSE,
                  **QUIET})
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False, **QUIET})
    meta = consumer.consumer_group_metadata()
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("dec-out", b"one", partition=0)
    p.send_offsets_to_transaction([TopicPartition("dec-in", 0, 1)], meta, 30)  # X is cached now
    p.commit_transaction(30)

    c.kill(x)
    # fenced and left out of Metadata; the group moved to a live broker
    wait_until(lambda: coordinator(c.ports[out_leader], group, 0) not in (x, -1), timeout=30,
               message="the group's partition to move off the dead broker")
    p.list_topics(timeout=10)  # a Metadata answer without X: librdkafka decommissions it
    p.begin_transaction()
    p.produce("dec-out", b"two", partition=0)
    outcome: list[object] = []

    def send() -> None:
        try:
            p.send_offsets_to_transaction([TopicPartition("dec-in", 0, 2)], meta, 10)
            outcome.append("sent")
        except Exception as exc:  # an error is an answer too; only a hang fails the test
            outcome.append(exc)

    t = threading.Thread(target=send, daemon=True)
    t.start()
    t.join(RETURNS_WITHIN_S)
    try:
        assert outcome, (f"send_offsets_to_transaction(timeout 10 s) had not returned after {RETURNS_WITHIN_S:.0f}s "
                         f"(group coordinator {x} killed and decommissioned)")
    finally:
        consumer.close()
