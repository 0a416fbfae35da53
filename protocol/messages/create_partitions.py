"""CreatePartitions (key 37): raise the partition count of existing topics."""

from __future__ import annotations

from ..schema import BOOL, INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 37


@schema
class CreatePartitionsAssignment(Struct):
    broker_ids: list[int] = f(Array(INT32))


@schema
class CreatePartitionsTopic(Struct):
    name: str = f(STRING)
    count: int = f(INT32)
    # null: the broker places the new partitions; a list: one replica set per new partition
    assignments: list[CreatePartitionsAssignment] | None = f(Array(CreatePartitionsAssignment), default=None)


@schema
class CreatePartitionsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 3)
    FLEXIBLE = 2
    topics: list[CreatePartitionsTopic] = f(Array(CreatePartitionsTopic))
    timeout_ms: int = f(INT32, default=60000)
    validate_only: bool = f(BOOL)


@schema
class CreatePartitionsTopicResult(Struct):
    name: str = f(STRING)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)


@schema
class CreatePartitionsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 3)
    FLEXIBLE = 2
    throttle_time_ms: int = f(INT32)
    results: list[CreatePartitionsTopicResult] = f(Array(CreatePartitionsTopicResult))
