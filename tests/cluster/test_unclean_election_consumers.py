"""Consumers that read records an unclean leader election then lost resume where the logs part
(OffsetForLeaderEpoch, KIP-320), with three real broker processes.

The partition's leader takes records the paused follower never copies; consumers of both client
libraries read them; the leader is SIGKILLed and the follower, elected uncleanly, leads under a
new epoch from the controller without them and takes new records at the same offsets. Without
the epoch check the consumers' positions would be out of range and auto.offset.reset=earliest
would replay from 0; with it they continue at the point of divergence.

(These were single-broker compat tests that wrote the new epoch into the log by hand; a broker
now leads only at the epoch the controller gives it, so the election must be a real one.)
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from helpers import unique_topic
from helpers.cluster import Cluster
from helpers.cluster_metadata import SHORT_SESSION, listed_everywhere, metadata, new_topic, voters_for
from helpers.confluent import QUIET
from helpers.raw import Raw
from helpers.wait import wait_until

from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.records import Record, build_batch

with warnings.catch_warnings():  # kafka-python loads its schemas with a deprecated importlib API
    warnings.simplefilter("ignore")
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition


def produce(port: int, topic: str, values: list[bytes]) -> None:
    """One single-record batch each, acks=all."""
    raw = Raw(port)
    try:
        for v in values:
            resp = raw.request(ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(
                    index=0, records=build_batch([Record(0, 0, None, v)]))])]), 9)
            assert isinstance(resp, ProduceResponse)
            assert resp.responses[0].partition_responses[0].error_code == 0, resp
    finally:
        raw.close()


def _partition(c: Cluster, node: int, topic: str) -> tuple[int, int, tuple[int, ...], tuple[int, ...]] | None:
    m = metadata(c.ports[node], topic)
    return m[1][topic].partitions[0] if m is not None and topic in m[1] else None


def _first_two_after(poll: Callable[[], list[tuple[int, bytes]]]) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 60
    while len(got) < 2 and time.monotonic() < deadline:
        got += poll()
    return got[:2]


def test_consumers_resume_at_the_point_of_divergence_after_an_unclean_election(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env={**SHORT_SESSION,
                                      "KETCH_REPLICA_LAG_TIME_MAX_MS": "1500"})
    listed_everywhere(c)
    topic = unique_topic("unclean")
    layout = new_topic(c, topic, 1, 2, {"unclean.leader.election.enable": "true", "min.insync.replicas": "1"})
    replicas = layout.partitions[0][2]
    bystander = next(n for n in c.node_ids if n not in replicas)
    c.wait_until(lambda: (p := _partition(c, bystander, topic)) is not None and len(p[3]) == 2, timeout=30,
                 message="both replicas in sync")
    state = _partition(c, bystander, topic)
    assert state is not None
    leader = state[1]
    follower = next(r for r in replicas if r != leader)
    produce(c.ports[leader], topic, [b"old%d" % i for i in range(6)])  # offsets 0-5 on both replicas

    c.pause(follower)
    c.wait_until(lambda: (p := _partition(c, bystander, topic)) is not None and p[3] == (leader,), timeout=30,
                 message="the paused follower out of the ISR")
    produce(c.ports[leader], topic, [b"old%d" % i for i in range(6, 10)])  # offsets 6-9: the leader's only

    bootstrap = f"127.0.0.1:{c.ports[bystander]}"
    cf = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("g"), "enable.auto.commit": False,
                   "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500, **QUIET})
    kp = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                       metadata_max_age_ms=500)
    try:
        # from the beginning, not from a committed offset: with a broker paused, `__consumer_offsets`
        # (replication factor 3) cannot be created, so no group coordinator could answer
        cf.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        kp.assign([KpTopicPartition(topic, 0)])
        cf_seen: list[int] = []
        kp_seen: list[int] = []

        def cf_read_all() -> bool:
            m = cf.poll(0.1)
            if m is not None and not m.error():
                cf_seen.append(m.offset())
            return len(cf_seen) == 10

        def kp_read_all() -> bool:
            kp_seen.extend(r.offset for recs in kp.poll(100).values() for r in recs)
            return len(kp_seen) == 10

        wait_until(cf_read_all, timeout=60, interval=0, message="librdkafka reads the ten records")
        # kafka-python forgets its position's epoch when a fetch comes back empty (it then cannot
        # check it against the new leader and resets to earliest): the leader goes before its
        # next fetch is answered
        wait_until(kp_read_all, timeout=60, interval=0, message="kafka-python reads the ten records")
        epoch = _partition(c, bystander, topic)

        c.kill(leader)
        c.resume(follower)
        c.wait_until(lambda: (p := _partition(c, bystander, topic)) is not None and p[1] == follower, timeout=30,
                     message=f"the follower elected uncleanly (was {epoch})")
        c.wait_until(lambda: (p := _partition(c, follower, topic)) is not None and p[1] == follower, timeout=30,
                     message="the new leader knows it leads")
        produce(c.ports[follower], topic, [b"new0", b"new1"])  # offsets 6-7 under the new epoch

        def cf_poll() -> list[tuple[int, bytes]]:
            m = cf.poll(0.2)
            return [] if m is None or m.error() else [(m.offset(), m.value())]

        def kp_poll() -> list[tuple[int, bytes]]:
            return [(r.offset, r.value) for recs in kp.poll(200).values() for r in recs]

        assert _first_two_after(cf_poll) == [(6, b"new0"), (7, b"new1")]
        assert _first_two_after(kp_poll) == [(6, b"new0"), (7, b"new1")]
    finally:
        cf.close()
        kp.close()
