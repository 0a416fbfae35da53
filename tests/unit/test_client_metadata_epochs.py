"""The client's metadata never goes back to an older leader epoch (KIP-320, as Java's Metadata).

A broker back from a stall, or behind on the metadata log, answers Metadata from its old view:
for a partition it names an earlier leader at an earlier epoch -- often itself. Taken as news, it
sent the consumer's fetches there, whose shorter log answered OFFSET_OUT_OF_RANGE, and the
consumer reset to the earliest offset and read the partition again from 0 (simulation seed 4292:
both plain consumers, offset 1384 then 0). A partition's cached view is kept against an older one.
"""

from __future__ import annotations

import uuid

from client.cluster import Cluster
from client.structs import TopicPartition
from protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

TOPIC_ID = uuid.UUID(int=7)
TP = TopicPartition("mixed", 0)


def answer(leader: int, epoch: int, topic_id: uuid.UUID = TOPIC_ID) -> MetadataResponse:
    return MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=n, host=f"10.0.0.{n}", port=9092) for n in (1, 2, 3)],
        cluster_id="c", controller_id=1,
        topics=[MetadataResponseTopic(error_code=0, name="mixed", topic_id=topic_id, partitions=[
            MetadataResponsePartition(error_code=0, partition_index=0, leader_id=leader, leader_epoch=epoch,
                                      replica_nodes=[1, 2, 3], isr_nodes=[1, 2, 3])])])


def leader(cluster: Cluster) -> tuple[int, int]:
    p = cluster.topics["mixed"].partitions[0]
    return p.leader, p.leader_epoch


def test_an_older_leader_epoch_does_not_replace_a_newer_one() -> None:
    cluster = Cluster("10.0.0.1:9092")
    cluster._apply(answer(1, 3), replace_all=False)
    assert leader(cluster) == (1, 3) and cluster.leader_for(TP) == 1
    cluster._apply(answer(3, 2), replace_all=False)  # a stale broker's view of itself
    assert leader(cluster) == (1, 3) and cluster.leader_for(TP) == 1
    cluster._apply(answer(3, 2), replace_all=True)  # nor when every topic is replaced
    assert leader(cluster) == (1, 3)
    cluster._apply(answer(-1, 4), replace_all=False)  # newer: no leader for now
    assert leader(cluster) == (-1, 4) and cluster.leader_for(TP) is None
    cluster._apply(answer(2, 4), replace_all=False)  # the same epoch is taken as it comes
    assert leader(cluster) == (2, 4)


def test_a_recreated_topic_starts_its_epochs_again() -> None:
    cluster = Cluster("10.0.0.1:9092")
    cluster._apply(answer(1, 9), replace_all=False)
    cluster._apply(answer(2, 0, uuid.UUID(int=8)), replace_all=False)
    assert leader(cluster) == (2, 0)
