"""DescribeTopicPartitions (key 75, KIP-966): topic metadata paged by a partition cursor, so a
client can describe topics with very many partitions without one huge Metadata answer."""

from __future__ import annotations

import uuid

from ..schema import BOOL, INT16, INT32, STRING, UUID, Array, Message, NullableStruct, Struct, f, schema

KEY = 75


@schema
class TopicRequest(Struct):
    name: str = f(STRING)


@schema
class Cursor(Struct):
    topic_name: str = f(STRING)
    partition_index: int = f(INT32)


@schema
class DescribeTopicPartitionsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    topics: list[TopicRequest] = f(Array(TopicRequest))
    response_partition_limit: int = f(INT32, default=2000)
    cursor: Cursor | None = f(NullableStruct(Cursor), default=None)


@schema
class DescribeTopicPartitionsResponsePartition(Struct):
    error_code: int = f(INT16)
    partition_index: int = f(INT32)
    leader_id: int = f(INT32)
    leader_epoch: int = f(INT32, default=-1)
    replica_nodes: list[int] = f(Array(INT32))
    isr_nodes: list[int] = f(Array(INT32))
    eligible_leader_replicas: list[int] | None = f(Array(INT32), default=None)
    last_known_elr: list[int] | None = f(Array(INT32), default=None)
    offline_replicas: list[int] = f(Array(INT32))


@schema
class DescribeTopicPartitionsResponseTopic(Struct):
    error_code: int = f(INT16)
    name: str | None = f(STRING)
    topic_id: uuid.UUID = f(UUID)
    is_internal: bool = f(BOOL)
    partitions: list[DescribeTopicPartitionsResponsePartition] = f(Array(DescribeTopicPartitionsResponsePartition))
    topic_authorized_operations: int = f(INT32, default=-(2**31))


@schema
class DescribeTopicPartitionsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    topics: list[DescribeTopicPartitionsResponseTopic] = f(Array(DescribeTopicPartitionsResponseTopic))
    next_cursor: Cursor | None = f(NullableStruct(Cursor), default=None)
