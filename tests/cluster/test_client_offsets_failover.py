"""The bundled client's offset lookups (ListOffsets: end_offsets, beginning_offsets, an offset
reset, Admin.list_offsets) when the partition's leader has just died.

Only the leader can answer them, and right after a SIGKILL the metadata still names it until the
controller fences it. Java's KafkaConsumer.endOffsets asks again after a metadata refresh until
its timeout; ours failed at the first refused connection (ConnectionLostError), which the
pipeline soak's harness met when it asked end_offsets right after killing a broker.
"""

from __future__ import annotations

import asyncio

from confluent_kafka import Producer
from helpers.cluster import Cluster
from helpers.cluster_metadata import SHORT_SESSION, listed_everywhere, new_topic, voters_for

from client import Consumer, TopicPartition

TOPIC = "offsets-failover"


def test_end_offsets_wait_for_the_next_leader_when_the_leader_is_killed(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env=SHORT_SESSION)
    listed_everywhere(c)
    layout = new_topic(c, TOPIC, 1, 3, {"min.insync.replicas": "2"})
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "log_level": 3})
    for i in range(5):
        p.produce(TOPIC, b"r%d" % i)
    assert p.flush(30) == 0
    leader = layout.partitions[0][1]
    c.kill(leader)  # SIGKILL: its session has seconds to run before the controller fences it

    async def ends() -> dict[TopicPartition, int]:
        async with Consumer(c.bootstrap, request_timeout_ms=30_000) as consumer:
            return await consumer.end_offsets([TopicPartition(TOPIC, 0)])

    assert asyncio.run(ends()) == {TopicPartition(TOPIC, 0): 5}
