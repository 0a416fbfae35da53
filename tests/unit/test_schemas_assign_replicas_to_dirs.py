"""Byte-exact encodings of AssignReplicasToDirs (73, KIP-858), worked out by hand from Kafka's
AssignReplicasToDirsRequest.json / Response.json (version 0, flexible)."""

from __future__ import annotations

import uuid

from protocol.messages import assign_replicas_to_dirs as ard
from protocol.supported import CONTROLLER_SUPPORTED, SUPPORTED

DIR = uuid.UUID(int=2)
TOPIC = uuid.UUID(int=3)


def _hex(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def test_request() -> None:
    msg = ard.AssignReplicasToDirsRequest(broker_id=1, broker_epoch=5, directories=[ard.DirectoryData(id=DIR, topics=[
        ard.TopicData(topic_id=TOPIC, partitions=[ard.PartitionData(partition_index=0),
                                                  ard.PartitionData(partition_index=2)])])])
    wire = _hex("00000001 0000000000000005"  # broker id, broker epoch
                "02" + DIR.hex +  # directories: 1, its id
                "02" + TOPIC.hex +  # topics: 1, its id
                "03 00000000 00 00000002 00"  # partitions: 2, each an index and its tags
                "00 00 00")  # topic, directory and request tags
    assert msg.encode(0) == wire
    assert ard.AssignReplicasToDirsRequest.decode(wire, 0) == msg


def test_response() -> None:
    msg = ard.AssignReplicasToDirsResponse(throttle_time_ms=0, error_code=0, directories=[ard.DirectoryResult(
        id=DIR, topics=[ard.TopicResult(topic_id=TOPIC, partitions=[
            ard.PartitionResult(partition_index=7, error_code=3)])])])
    wire = _hex("00000000 0000 02" + DIR.hex + "02" + TOPIC.hex + "02 00000007 0003 00 00 00 00")
    assert msg.encode(0) == wire
    assert ard.AssignReplicasToDirsResponse.decode(wire, 0) == msg


def test_advertised_on_the_controller_listener_only() -> None:
    assert CONTROLLER_SUPPORTED[73] == (0, 0) and 73 not in SUPPORTED
