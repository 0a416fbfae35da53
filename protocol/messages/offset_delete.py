"""OffsetDelete (key 47): drop a group's committed offsets for some partitions (KIP-496)."""

from __future__ import annotations

from ..schema import INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 47


@schema
class OffsetDeleteRequestPartition(Struct):
    partition_index: int = f(INT32)


@schema
class OffsetDeleteRequestTopic(Struct):
    name: str = f(STRING)
    partitions: list[OffsetDeleteRequestPartition] = f(Array(OffsetDeleteRequestPartition))


@schema
class OffsetDeleteRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 0)
    FLEXIBLE = None
    group_id: str = f(STRING)
    topics: list[OffsetDeleteRequestTopic] = f(Array(OffsetDeleteRequestTopic))


@schema
class OffsetDeleteResponsePartition(Struct):
    partition_index: int = f(INT32)
    error_code: int = f(INT16)


@schema
class OffsetDeleteResponseTopic(Struct):
    name: str = f(STRING)
    partitions: list[OffsetDeleteResponsePartition] = f(Array(OffsetDeleteResponsePartition))


@schema
class OffsetDeleteResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 0)
    FLEXIBLE = None
    error_code: int = f(INT16)
    throttle_time_ms: int = f(INT32)
    topics: list[OffsetDeleteResponseTopic] = f(Array(OffsetDeleteResponseTopic))
