"""Byte-exact encodings of OffsetForLeaderEpoch, DescribeCluster and OffsetDelete, worked out by hand
from Kafka's message definitions (test_schemas.py round-trips them against kafka-python as well)."""

from __future__ import annotations

from protocol.messages.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from protocol.messages.offset_delete import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
    OffsetForLeaderTopicResult,
)
from protocol.schema import Message


def _hex(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def _check(msg: Message, version: int, expected: bytes) -> None:
    assert msg.encode(version) == expected
    assert type(msg).decode(expected, version) == msg


def test_offset_for_leader_epoch_request() -> None:
    msg = OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderTopic(topic="t", partitions=[
        OffsetForLeaderPartition(partition=0, current_leader_epoch=5, leader_epoch=3)])])
    _check(msg, 4, _hex(
        "ffffffff"  # replica_id (v3+)
        "02 02 74"  # topics: compact array of 1, topic "t"
        "02 00000000 00000005 00000003 00"  # partition, current_leader_epoch (v2+), leader_epoch, tags
        "00 00"))  # topic tags, request tags
    # v2: classic encoding, no replica_id
    assert msg.encode(2) == _hex("00000001 0001 74 00000001 00000000 00000005 00000003")
    # v0-1: no current_leader_epoch either; it decodes as -1 ("not given")
    v0 = _hex("00000001 0001 74 00000001 00000000 00000003")
    assert msg.encode(0) == v0
    back = OffsetForLeaderEpochRequest.decode(v0, 0)
    assert back.topics[0].partitions[0].current_leader_epoch == -1 and back.replica_id == -2


def test_offset_for_leader_epoch_response() -> None:
    msg = OffsetForLeaderEpochResponse(topics=[OffsetForLeaderTopicResult(topic="t", partitions=[
        EpochEndOffset(error_code=0, partition=0, leader_epoch=2, end_offset=10)])])
    _check(msg, 1, _hex("00000001 0001 74 00000001 0000 00000000 00000002 000000000000000a"))
    assert msg.encode(0) == _hex("00000001 0001 74 00000001 0000 00000000 000000000000000a")  # no epoch
    _check(msg, 2, _hex("00000000 00000001 0001 74 00000001 0000 00000000 00000002 000000000000000a"))


def test_describe_cluster() -> None:
    _check(DescribeClusterRequest(), 0, _hex("00 00"))  # include ops, tags
    _check(DescribeClusterRequest(include_cluster_authorized_operations=True, endpoint_type=2), 2,
           _hex("01 02 00 00"))  # include ops, endpoint_type (v1+), include_fenced_brokers (v2+), tags
    msg = DescribeClusterResponse(cluster_id="c", controller_id=1, brokers=[
        DescribeClusterBroker(broker_id=1, host="h", port=9092, rack=None)])
    _check(msg, 1, _hex(
        "00000000 0000 00"  # throttle_time_ms, error_code, error_message null
        "01"  # endpoint_type 1 (v1+)
        "02 63 00000001"  # cluster_id "c", controller_id
        "02 00000001 02 68 00002384 00 00"  # one broker: id, host "h", port 9092, rack null, tags
        "80000000 00"))  # cluster_authorized_operations: not requested, tags


def test_offset_delete_response() -> None:
    msg = OffsetDeleteResponse(topics=[OffsetDeleteResponseTopic(name="t", partitions=[
        OffsetDeleteResponsePartition(partition_index=2, error_code=86)])])
    # error_code comes before throttle_time_ms here, unlike most responses
    _check(msg, 0, _hex("0000 00000000 00000001 0001 74 00000001 00000002 0056"))
