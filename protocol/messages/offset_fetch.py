"""OffsetFetch (key 9): read a consumer group's committed offsets."""

from __future__ import annotations

from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Message, Struct, f, schema

KEY = 9


@schema
class OffsetFetchRequestTopic(Struct):
    name: str = f(STRING, "0-7")
    partition_indexes: list[int] = f(Array(INT32), "0-7")


@schema
class OffsetFetchRequestTopics(Struct):
    name: str = f(STRING, "8+")
    partition_indexes: list[int] = f(Array(INT32), "8+")


@schema
class OffsetFetchRequestGroup(Struct):
    group_id: str = f(STRING, "8+")
    member_id: str | None = f(STRING, "9+", default=None)
    member_epoch: int = f(INT32, "9+", default=-1)
    topics: list[OffsetFetchRequestTopics] | None = f(Array(OffsetFetchRequestTopics), "8+")


@schema
class OffsetFetchRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 9)
    FLEXIBLE = 6
    group_id: str = f(STRING, "0-7")
    topics: list[OffsetFetchRequestTopic] | None = f(Array(OffsetFetchRequestTopic), "0-7")
    groups: list[OffsetFetchRequestGroup] = f(Array(OffsetFetchRequestGroup), "8+")
    require_stable: bool = f(BOOL, "7+", default=False)


@schema
class OffsetFetchResponsePartition(Struct):
    partition_index: int = f(INT32, "0-7")
    committed_offset: int = f(INT64, "0-7")
    committed_leader_epoch: int = f(INT32, "5-7", default=-1)
    metadata: str | None = f(STRING, "0-7")
    error_code: int = f(INT16, "0-7")


@schema
class OffsetFetchResponseTopic(Struct):
    name: str = f(STRING, "0-7")
    partitions: list[OffsetFetchResponsePartition] = f(Array(OffsetFetchResponsePartition), "0-7")


@schema
class OffsetFetchResponsePartitions(Struct):
    partition_index: int = f(INT32, "8+")
    committed_offset: int = f(INT64, "8+")
    committed_leader_epoch: int = f(INT32, "8+", default=-1)
    metadata: str | None = f(STRING, "8+")
    error_code: int = f(INT16, "8+")


@schema
class OffsetFetchResponseTopics(Struct):
    name: str = f(STRING, "8+")
    partitions: list[OffsetFetchResponsePartitions] = f(Array(OffsetFetchResponsePartitions), "8+")


@schema
class OffsetFetchResponseGroup(Struct):
    group_id: str = f(STRING, "8+")
    topics: list[OffsetFetchResponseTopics] = f(Array(OffsetFetchResponseTopics), "8+")
    error_code: int = f(INT16, "8+", default=0)


@schema
class OffsetFetchResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 9)
    FLEXIBLE = 6
    throttle_time_ms: int = f(INT32, "3+")
    topics: list[OffsetFetchResponseTopic] = f(Array(OffsetFetchResponseTopic), "0-7")
    error_code: int = f(INT16, "2-7", default=0)
    groups: list[OffsetFetchResponseGroup] = f(Array(OffsetFetchResponseGroup), "8+")
