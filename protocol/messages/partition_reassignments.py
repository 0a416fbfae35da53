"""AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46): move partitions'
replicas between brokers (kafka-reassign-partitions), and see the moves under way. Both flexible
from v0; a null replica list cancels a partition's reassignment."""

from __future__ import annotations

from ..schema import INT16, INT32, STRING, Array, Message, Struct, f, schema

ALTER_KEY = 45
LIST_KEY = 46


@schema
class ReassignablePartition(Struct):
    partition_index: int = f(INT32)
    replicas: list[int] | None = f(Array(INT32), default=None)


@schema
class ReassignableTopic(Struct):
    name: str = f(STRING)
    partitions: list[ReassignablePartition] = f(Array(ReassignablePartition))


@schema
class AlterPartitionReassignmentsRequest(Message):
    API_KEY = ALTER_KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    timeout_ms: int = f(INT32, default=60000)
    topics: list[ReassignableTopic] = f(Array(ReassignableTopic))


@schema
class ReassignablePartitionResponse(Struct):
    partition_index: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)


@schema
class ReassignableTopicResponse(Struct):
    name: str = f(STRING)
    partitions: list[ReassignablePartitionResponse] = f(Array(ReassignablePartitionResponse))


@schema
class AlterPartitionReassignmentsResponse(Message):
    API_KEY = ALTER_KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    responses: list[ReassignableTopicResponse] = f(Array(ReassignableTopicResponse))


@schema
class ListPartitionReassignmentsTopics(Struct):
    name: str = f(STRING)
    partition_indexes: list[int] = f(Array(INT32))


@schema
class ListPartitionReassignmentsRequest(Message):
    API_KEY = LIST_KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    timeout_ms: int = f(INT32, default=60000)
    topics: list[ListPartitionReassignmentsTopics] | None = f(Array(ListPartitionReassignmentsTopics), default=None)


@schema
class OngoingPartitionReassignment(Struct):
    partition_index: int = f(INT32)
    replicas: list[int] = f(Array(INT32))
    adding_replicas: list[int] = f(Array(INT32))
    removing_replicas: list[int] = f(Array(INT32))


@schema
class OngoingTopicReassignment(Struct):
    name: str = f(STRING)
    partitions: list[OngoingPartitionReassignment] = f(Array(OngoingPartitionReassignment))


@schema
class ListPartitionReassignmentsResponse(Message):
    API_KEY = LIST_KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    topics: list[OngoingTopicReassignment] = f(Array(OngoingTopicReassignment))
