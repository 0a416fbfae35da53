"""AlterReplicaLogDirs (key 34): move replicas to other log directories of the broker the request
is sent to (kafka-reassign-partitions with log_dirs, AdminClient.alterReplicaLogDirs).

Kafka's AlterReplicaLogDirsRequest.json / Response.json: versions 0-2 (v1 is v0; Kafka 4.0
dropped v0 of the response, whose layout is v1's), flexible from 2.
"""

from __future__ import annotations

from ..schema import INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 34


@schema
class AlterReplicaLogDirTopic(Struct):
    name: str = f(STRING)
    partitions: list[int] = f(Array(INT32))


@schema
class AlterReplicaLogDir(Struct):
    path: str = f(STRING)  # the absolute path of the destination log directory
    topics: list[AlterReplicaLogDirTopic] = f(Array(AlterReplicaLogDirTopic))


@schema
class AlterReplicaLogDirsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    dirs: list[AlterReplicaLogDir] = f(Array(AlterReplicaLogDir))


@schema
class AlterReplicaLogDirPartitionResult(Struct):
    partition_index: int = f(INT32)
    error_code: int = f(INT16)


@schema
class AlterReplicaLogDirTopicResult(Struct):
    topic_name: str = f(STRING)
    partitions: list[AlterReplicaLogDirPartitionResult] = f(Array(AlterReplicaLogDirPartitionResult))


@schema
class AlterReplicaLogDirsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    throttle_time_ms: int = f(INT32)
    results: list[AlterReplicaLogDirTopicResult] = f(Array(AlterReplicaLogDirTopicResult))
