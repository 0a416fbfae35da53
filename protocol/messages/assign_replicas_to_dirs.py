"""AssignReplicasToDirs (key 73, KIP-858): a broker tells the active controller which of its log
directories holds each of its replicas, so that when one fails the controller knows which
replicas went with it. Controller listener only; v0, flexible."""

from __future__ import annotations

import uuid

from ..schema import INT16, INT32, INT64, UUID, Array, Message, Struct, f, schema

KEY = 73


@schema
class PartitionData(Struct):
    partition_index: int = f(INT32)


@schema
class TopicData(Struct):
    topic_id: uuid.UUID = f(UUID)
    partitions: list[PartitionData] = f(Array(PartitionData))


@schema
class DirectoryData(Struct):
    id: uuid.UUID = f(UUID)
    topics: list[TopicData] = f(Array(TopicData))


@schema
class AssignReplicasToDirsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    broker_id: int = f(INT32)
    broker_epoch: int = f(INT64, default=-1)
    directories: list[DirectoryData] = f(Array(DirectoryData))


@schema
class PartitionResult(Struct):
    partition_index: int = f(INT32)
    error_code: int = f(INT16)


@schema
class TopicResult(Struct):
    topic_id: uuid.UUID = f(UUID)
    partitions: list[PartitionResult] = f(Array(PartitionResult))


@schema
class DirectoryResult(Struct):
    id: uuid.UUID = f(UUID)
    topics: list[TopicResult] = f(Array(TopicResult))


@schema
class AssignReplicasToDirsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    directories: list[DirectoryResult] = f(Array(DirectoryResult))
