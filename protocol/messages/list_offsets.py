"""ListOffsets (key 2): look up a partition offset by timestamp (earliest, latest, or a time)."""

from __future__ import annotations

from ..schema import INT8, INT16, INT32, INT64, STRING, Array, Message, Struct, f, schema

KEY = 2


@schema
class ListOffsetsPartition(Struct):
    partition_index: int = f(INT32)
    current_leader_epoch: int = f(INT32, "4+", default=-1)
    timestamp: int = f(INT64)
    max_num_offsets: int = f(INT32, "0", default=1)


@schema
class ListOffsetsTopic(Struct):
    name: str = f(STRING)
    partitions: list[ListOffsetsPartition] = f(Array(ListOffsetsPartition))


@schema
class ListOffsetsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 10)
    FLEXIBLE = 6
    replica_id: int = f(INT32)
    isolation_level: int = f(INT8, "2+")
    topics: list[ListOffsetsTopic] = f(Array(ListOffsetsTopic))
    timeout_ms: int = f(INT32, "10+")


@schema
class ListOffsetsPartitionResponse(Struct):
    partition_index: int = f(INT32)
    error_code: int = f(INT16)
    old_style_offsets: list[int] = f(Array(INT64), "0")
    timestamp: int = f(INT64, "1+", default=-1)
    offset: int = f(INT64, "1+", default=-1)
    leader_epoch: int = f(INT32, "4+", default=-1)


@schema
class ListOffsetsTopicResponse(Struct):
    name: str = f(STRING)
    partitions: list[ListOffsetsPartitionResponse] = f(Array(ListOffsetsPartitionResponse))


@schema
class ListOffsetsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 10)
    FLEXIBLE = 6
    throttle_time_ms: int = f(INT32, "2+")
    topics: list[ListOffsetsTopicResponse] = f(Array(ListOffsetsTopicResponse))
