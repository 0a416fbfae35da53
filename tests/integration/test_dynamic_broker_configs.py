"""Dynamic broker configs on a real broker, on the wire (issue 23, item 2's KIP-966 remainder, as
Kafka 4.1+ has them): the controller writes the cluster-wide min.insync.replicas, and every topic
reports it as DYNAMIC_DEFAULT_BROKER_CONFIG; IncrementalAlterConfigs / AlterConfigs on a BROKER
resource ("" cluster-wide, or the broker's id) change the broker defaults of topic configs, which
act on the running logs at once, are reported with Kafka's sources, and survive a restart."""

from __future__ import annotations

from helpers import BrokerProcess, unique_topic, wait_until
from helpers.raw import Raw

from protocol.errors import ErrorCode
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.records import build_batch_from_messages

TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, DEFAULT = 2, 3, 5  # Kafka's ConfigSource ids
NODE_ID = "1"


def describe(conn: Raw, resource_type: int, name: str) -> dict[str, tuple[str | None, int]]:
    resp = conn.request(DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=None)], include_synonyms=True), 4)
    assert isinstance(resp, DescribeConfigsResponse) and resp.results[0].error_code == 0, resp
    return {c.name: (c.value, c.config_source) for c in resp.results[0].configs}


def alter(conn: Raw, name: str, ops: list[tuple[str, int, str | None]]) -> tuple[int, str | None]:
    resp = conn.request(IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=BROKER, resource_name=name,
        configs=[AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])]), 1)
    assert isinstance(resp, IncrementalAlterConfigsResponse)
    return resp.responses[0].error_code, resp.responses[0].error_message


def produce_code(conn: Raw, topic: str, value: bytes) -> int:
    resp = conn.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(
            index=0, records=build_batch_from_messages([(None, value, [], None)]))])]), 9)
    assert isinstance(resp, ProduceResponse)
    return resp.responses[0].partition_responses[0].error_code


def test_dynamic_broker_configs_act_at_once_are_reported_and_survive_a_restart(broker: BrokerProcess) -> None:
    conn = Raw(broker.port)
    try:
        t = unique_topic("dyn")
        resp = conn.request(CreateTopicsRequest(topics=[CreatableTopic(name=t, num_partitions=1,
                                                                       replication_factor=-1)], timeout_ms=5000), 5)
        assert resp.topics[0].error_code == 0  # type: ignore[attr-defined]
        # the active controller wrote the cluster-wide min.insync.replicas (the static setting, 1)
        wait_until(lambda: describe(conn, BROKER, "") == {"min.insync.replicas": ("1", DYNAMIC_DEFAULT_BROKER)},
                   timeout=10, message="the cluster-wide min.insync.replicas")
        assert describe(conn, TOPIC, t)["min.insync.replicas"] == ("1", DYNAMIC_DEFAULT_BROKER)

        big = b"x" * 3000
        assert produce_code(conn, t, big) == 0
        assert alter(conn, "", [("message.max.bytes", SET, "1000")]) == (0, None)
        assert produce_code(conn, t, big) == ErrorCode.MESSAGE_TOO_LARGE  # the running log took it
        assert describe(conn, TOPIC, t)["max.message.bytes"] == ("1000", DYNAMIC_DEFAULT_BROKER)
        assert describe(conn, BROKER, NODE_ID)["message.max.bytes"] == ("1000", DYNAMIC_DEFAULT_BROKER)
        assert alter(conn, NODE_ID, [("message.max.bytes", SET, "5000")]) == (0, None)  # this broker's own
        assert produce_code(conn, t, big) == 0
        assert describe(conn, TOPIC, t)["max.message.bytes"] == ("5000", DYNAMIC_BROKER)
        assert alter(conn, NODE_ID, [("message.max.bytes", DELETE, None)]) == (0, None)
        assert produce_code(conn, t, big) == ErrorCode.MESSAGE_TOO_LARGE  # back to the cluster-wide value
    finally:
        conn.close()
    broker.restart(kill=True)
    conn = Raw(broker.port)
    try:
        assert describe(conn, TOPIC, t)["max.message.bytes"] == ("1000", DYNAMIC_DEFAULT_BROKER)
        assert produce_code(conn, t, big) == ErrorCode.MESSAGE_TOO_LARGE
        assert alter(conn, "", [("message.max.bytes", DELETE, None)]) == (0, None)
        assert describe(conn, TOPIC, t)["max.message.bytes"][1] == DEFAULT
        assert produce_code(conn, t, big) == 0
    finally:
        conn.close()
