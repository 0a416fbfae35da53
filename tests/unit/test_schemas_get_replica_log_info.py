"""Byte-exact encodings of GetReplicaLogInfo (93, KIP-966), worked out by hand from Kafka's
GetReplicaLogInfoRequest.json / Response.json (version 0, flexible)."""

from __future__ import annotations

import uuid

from protocol.messages import get_replica_log_info as grl

TOPIC = uuid.UUID(int=3)


def _hex(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def test_request() -> None:
    msg = grl.GetReplicaLogInfoRequest(topic_partitions=[grl.TopicPartitions(topic_id=TOPIC, partitions=[0, 2])])
    wire = _hex("02" + TOPIC.hex +  # topic partitions: 1, its topic id
                "03 00000000 00000002"  # partitions: 2
                "00 00")  # topic and request tags
    assert msg.encode(0) == wire
    assert grl.GetReplicaLogInfoRequest.decode(wire, 0) == msg
    assert grl.GetReplicaLogInfoRequest(topic_partitions=None).encode(0) == _hex("00 00")  # nullable


def test_response() -> None:
    msg = grl.GetReplicaLogInfoResponse(throttle_time_ms=0, broker_epoch=9, truncated=True,
                                        topic_partition_log_info_list=[grl.TopicPartitionLogInfo(
                                            topic_id=TOPIC, partition_log_info=[grl.PartitionLogInfo(
                                                partition=1, last_written_leader_epoch=4, current_leader_epoch=5,
                                                log_end_offset=608, error_code=0)])])
    wire = _hex("00000000 0000000000000009 01"  # throttle, broker epoch, truncated
                "02" + TOPIC.hex +
                "02 00000001 00000004 00000005 0000000000000260 0000 00"  # one partition's log info
                "00 00")  # topic and response tags
    assert msg.encode(0) == wire
    assert grl.GetReplicaLogInfoResponse.decode(wire, 0) == msg
