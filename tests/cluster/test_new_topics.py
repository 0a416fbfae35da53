"""A topic just created, as clients on three brokers see it (issue 23 item 14).

Brokers apply the metadata log each at its own moment. CreateTopics used to answer as soon as the
broker it came to had the topic: a client's next request to another broker (kafka-python's
`create_topics(wait_for_metadata=True)` then `list_partition_offsets`, a fresh consumer's topic
list) could reach one that had not yet applied it, and was told the topic does not exist
(UNKNOWN_TOPIC_OR_PARTITION, fatal to kafka-python). And a broker that knows a partition from the
metadata but holds no replica of it must answer NOT_LEADER_OR_FOLLOWER (retriable: the client
refreshes its metadata) in every API, as Kafka's ReplicaManager does; UNKNOWN_TOPIC_OR_PARTITION
is for a topic its metadata does not have.
"""

from __future__ import annotations

from helpers.cluster import Cluster
from helpers.cluster_metadata import new_topic
from helpers.raw import Raw
from helpers.txn import txn_batch

from protocol.errors import ErrorCode
from protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.delete_records import DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.describe_producers import DescribeProducersRequest, TopicRequest
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)


def _listed_by_the_others(raws: dict[int, Raw], via: int) -> dict[int, dict[str, int]]:
    """Metadata for all topics from every broker but `via`, asked at once: {broker: {topic: partitions}}."""
    others = [n for n in raws if n != via]
    for n in others:
        raws[n].send(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
    out = {}
    for n in others:
        _, resp = raws[n].receive(MetadataRequest, 12)
        assert isinstance(resp, MetadataResponse)
        out[n] = {t.name or "": len(t.partitions) for t in resp.topics}
    return out


def test_once_create_topics_create_partitions_and_delete_topics_answer_every_broker_lists_the_change(cluster: Cluster) -> None:
    raws = {n: Raw(c_port) for n, c_port in cluster.ports.items()}
    try:
        lacking = []
        for i in range(9):
            via, name = 1 + i % 3, f"fresh-{i}"
            resp = raws[via].request(CreateTopicsRequest(topics=[CreatableTopic(
                name=name, num_partitions=4, replication_factor=1)], timeout_ms=10_000), 7)
            assert resp.topics[0].error_code == 0, resp  # type: ignore[union-attr]
            lacking += [(name, n) for n, topics in _listed_by_the_others(raws, via).items() if topics.get(name) != 4]

            resp = raws[via].request(CreatePartitionsRequest(topics=[CreatePartitionsTopic(name=name, count=6)],
                                                             timeout_ms=10_000, validate_only=False), 3)
            assert resp.results[0].error_code == 0, resp  # type: ignore[union-attr]
            lacking += [(f"{name} x6", n) for n, topics in _listed_by_the_others(raws, via).items()
                        if topics.get(name) != 6]

            resp = raws[via].request(DeleteTopicsRequest(topic_names=[name], timeout_ms=10_000), 5)
            assert resp.responses[0].error_code == 0, resp  # type: ignore[union-attr]
            lacking += [(f"{name} deleted", n) for n, topics in _listed_by_the_others(raws, via).items()
                        if name in topics]
        assert not lacking, f"(change, broker) not yet listed once answered: {lacking}"
    finally:
        for r in raws.values():
            r.close()


def _codes(port: int, inter_broker_port: int, topic: str, index: int) -> dict[str, int]:
    """What the broker answers, in each API, for one partition it does not hold."""
    raw = Raw(port)
    try:
        out = {}
        r = raw.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
            name=topic, partition_data=[PartitionProduceData(index=index, records=txn_batch(
                -1, -1, -1, transactional=False))])]), 9)
        out["Produce"] = r.responses[0].partition_responses[0].error_code  # type: ignore[union-attr]
        r = raw.request(FetchRequest(max_wait_ms=0, min_bytes=1, topics=[FetchTopic(topic=topic, partitions=[
            FetchPartition(partition=index, fetch_offset=0, partition_max_bytes=1024)])]), 12)
        out["Fetch"] = r.responses[0].partitions[0].error_code  # type: ignore[union-attr]
        r = raw.request(ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsPartition(partition_index=index, timestamp=-1)])]), 2)
        out["ListOffsets"] = r.topics[0].partitions[0].error_code  # type: ignore[union-attr]
        r = raw.request(OffsetForLeaderEpochRequest(topics=[OffsetForLeaderTopic(topic=topic, partitions=[
            OffsetForLeaderPartition(partition=index, leader_epoch=0)])]), 3)
        out["OffsetForLeaderEpoch"] = r.topics[0].partitions[0].error_code  # type: ignore[union-attr]
        r = raw.request(DeleteRecordsRequest(topics=[DeleteRecordsTopic(name=topic, partitions=[
            DeleteRecordsPartition(partition_index=index, offset=0)])], timeout_ms=5000), 1)
        out["DeleteRecords"] = r.topics[0].partitions[0].error_code  # type: ignore[union-attr]
        r = raw.request(DescribeProducersRequest(topics=[TopicRequest(name=topic, partition_indexes=[index])]), 0)
        out["DescribeProducers"] = r.topics[0].partitions[0].error_code  # type: ignore[union-attr]
    finally:
        raw.close()
    raw = Raw(inter_broker_port)
    try:
        r = raw.request(WriteTxnMarkersRequest(markers=[WritableTxnMarker(
            producer_id=1, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
            topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[index])])]), 1)
        out["WriteTxnMarkers"] = r.markers[0].topics[0].partitions[0].error_code  # type: ignore[union-attr]
    finally:
        raw.close()
    return out


def test_a_partition_known_from_the_metadata_but_held_elsewhere_is_not_leader_or_follower(cluster: Cluster) -> None:
    c = cluster
    layout = new_topic(c, "held-elsewhere", 3, 1)
    index, leader = next((i, p[1]) for i, p in enumerate(layout.partitions) if p[1] != 1)
    assert leader in (2, 3)
    b = c[1]
    port, inter_broker = b.port, int(b.inter_broker_bootstrap.split(":")[1])
    known = _codes(port, inter_broker, "held-elsewhere", index)
    assert known == dict.fromkeys(known, ErrorCode.NOT_LEADER_OR_FOLLOWER), known
    unknown = _codes(port, inter_broker, "never-created", 0)
    assert unknown == dict.fromkeys(unknown, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), unknown
