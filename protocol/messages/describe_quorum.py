"""DescribeQuorum (key 55): the metadata quorum's leader, epoch, high watermark and how far
each voter and observer has replicated (kafka-metadata-quorum describe --status)."""

from __future__ import annotations

import uuid

from ..schema import INT16, INT32, INT64, STRING, UINT16, UUID, Array, Message, Struct, f, schema

KEY = 55


@schema
class DescribeQuorumPartitionRequest(Struct):
    partition_index: int = f(INT32)


@schema
class DescribeQuorumTopicRequest(Struct):
    topic_name: str = f(STRING)
    partitions: list[DescribeQuorumPartitionRequest] = f(Array(DescribeQuorumPartitionRequest))


@schema
class DescribeQuorumRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 0
    topics: list[DescribeQuorumTopicRequest] = f(Array(DescribeQuorumTopicRequest))


@schema
class ReplicaState(Struct):
    replica_id: int = f(INT32)
    replica_directory_id: uuid.UUID = f(UUID, "2+")
    log_end_offset: int = f(INT64)
    last_fetch_timestamp: int = f(INT64, "1+", default=-1)
    last_caught_up_timestamp: int = f(INT64, "1+", default=-1)


@schema
class DescribeQuorumPartitionResponse(Struct):
    partition_index: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, "2+", default=None)
    leader_id: int = f(INT32)
    leader_epoch: int = f(INT32)
    high_watermark: int = f(INT64)
    current_voters: list[ReplicaState] = f(Array(ReplicaState))
    observers: list[ReplicaState] = f(Array(ReplicaState))


@schema
class DescribeQuorumTopicResponse(Struct):
    topic_name: str = f(STRING)
    partitions: list[DescribeQuorumPartitionResponse] = f(Array(DescribeQuorumPartitionResponse))


@schema
class Listener(Struct):
    name: str = f(STRING, "2+")
    host: str = f(STRING, "2+")
    port: int = f(UINT16, "2+")


@schema
class QuorumNode(Struct):
    node_id: int = f(INT32, "2+")
    listeners: list[Listener] = f(Array(Listener), "2+")


@schema
class DescribeQuorumResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 0
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, "2+", default=None)
    topics: list[DescribeQuorumTopicResponse] = f(Array(DescribeQuorumTopicResponse))
    nodes: list[QuorumNode] = f(Array(QuorumNode), "2+")
