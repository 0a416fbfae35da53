"""Issue 10: what a Kafka 4.x broker shows a client that reads ApiVersions — kafka-python infers
the broker version from the advertised maxima — and DescribeTopicPartitions (75, KIP-966) paged
by its cursor, through kafka-python's admin client and off the wire."""

from __future__ import annotations

import warnings

import pytest
from helpers import BrokerProcess, unique_topic
from helpers.compat_mode import REPLICATION_FACTOR
from helpers.confluent import create_topic
from helpers.raw import Raw

from protocol.errors import ErrorCode
from protocol.messages.describe_topic_partitions import (
    Cursor,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    TopicRequest,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient

pytestmark = pytest.mark.compat


def test_kafka_python_infers_a_kafka_4_broker(module_broker: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    try:
        version = admin._client.check_version()
    finally:
        admin.close()
    assert version >= (4, 0), version


def test_kafka_python_pages_describe_topic_partitions(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    a, b = sorted((unique_topic("dtp-a"), unique_topic("dtp-b")))
    create_topic(bs, a, 3)
    create_topic(bs, b, 2)
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        first = admin.describe_topic_partitions([b, a], response_partition_limit=4)
        assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in first["topics"]] == [
            (a, [0, 1, 2]), (b, [0])]
        assert first["next_cursor"] == {"topic_name": b, "partition_index": 1}
        second = admin.describe_topic_partitions([a, b], response_partition_limit=4, cursor=first["next_cursor"])
        assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in second["topics"]] == [(b, [1])]
        assert second["next_cursor"] is None
        p0 = first["topics"][0]["partitions"][0]
        # the first replica leads, and every replica is in sync (one broker: [1]; a cluster: three)
        assert p0["leader_id"] == p0["replica_nodes"][0] and sorted(p0["isr_nodes"]) == sorted(p0["replica_nodes"])
        assert len(p0["replica_nodes"]) == REPLICATION_FACTOR
    finally:
        admin.close()


def _describe(broker: BrokerProcess, req: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    raw = Raw(broker.port)
    try:
        resp = raw.request(req, 0)
    finally:
        raw.close()
    assert isinstance(resp, DescribeTopicPartitionsResponse)
    return resp


def test_describe_topic_partitions_unknown_topics_all_topics_and_a_foreign_cursor(module_broker: BrokerProcess) -> None:
    t = unique_topic("dtp-raw")
    create_topic(module_broker.bootstrap, t, 2)
    resp = _describe(module_broker, DescribeTopicPartitionsRequest(topics=[TopicRequest(name=t),
                                                                          TopicRequest(name="dtp-missing")]))
    by_name = {x.name: x for x in resp.topics}
    assert by_name["dtp-missing"].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert by_name[t].error_code == 0 and len(by_name[t].partitions) == 2 and resp.next_cursor is None

    everything = _describe(module_broker, DescribeTopicPartitionsRequest(topics=[]))
    names = [x.name for x in everything.topics]
    assert t in names and names == sorted(names)

    foreign = _describe(module_broker, DescribeTopicPartitionsRequest(
        topics=[TopicRequest(name=t)], cursor=Cursor(topic_name="not-asked", partition_index=0)))
    assert [(x.name, x.error_code) for x in foreign.topics] == [(t, ErrorCode.INVALID_REQUEST)]
