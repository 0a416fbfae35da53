"""Byte-exact encodings of AlterReplicaLogDirs (34), worked out by hand from Kafka's
AlterReplicaLogDirsRequest.json / Response.json (versions 0-2, flexible from 2)."""

from __future__ import annotations

from protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDir,
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopic,
    AlterReplicaLogDirTopicResult,
)
from protocol.schema import Message
from protocol.supported import SUPPORTED


def _hex(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def _check(msg: Message, version: int, expected: bytes) -> None:
    assert msg.encode(version) == expected
    assert type(msg).decode(expected, version) == msg


def test_request() -> None:
    msg = AlterReplicaLogDirsRequest(dirs=[AlterReplicaLogDir(path="/d", topics=[
        AlterReplicaLogDirTopic(name="t", partitions=[0, 2])])])
    classic = _hex("00000001 0002 2f64"  # dirs: 1, path "/d"
                   "00000001 0001 74"  # topics: 1, name "t"
                   "00000002 00000000 00000002")  # partitions [0, 2]
    _check(msg, 0, classic)
    _check(msg, 1, classic)  # v1 is v0
    _check(msg, 2, _hex("02 03 2f64"  # compact: dirs 1, path "/d"
                        "02 02 74 03 00000000 00000002 00"  # topics 1: "t", partitions [0, 2], tags
                        "00 00"))  # dir tags, request tags


def test_response() -> None:
    msg = AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[AlterReplicaLogDirTopicResult(
        topic_name="t", partitions=[AlterReplicaLogDirPartitionResult(partition_index=1, error_code=57)])])
    _check(msg, 1, _hex("00000000 00000001 0001 74 00000001 00000001 0039"))
    _check(msg, 2, _hex("00000000 02 02 74 02 00000001 0039 00 00 00"))


def test_advertised() -> None:
    assert SUPPORTED[34] == (0, 2)
