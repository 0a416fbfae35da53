"""OffsetCommit (key 8): store a consumer group's committed offsets."""

from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, Array, Message, Struct, f, schema

KEY = 8


@schema
class OffsetCommitRequestPartition(Struct):
    partition_index: int = f(INT32)
    committed_offset: int = f(INT64)
    committed_leader_epoch: int = f(INT32, "6+", default=-1)
    commit_timestamp: int = f(INT64, "1", default=-1)
    committed_metadata: str | None = f(STRING)


@schema
class OffsetCommitRequestTopic(Struct):
    name: str = f(STRING)
    partitions: list[OffsetCommitRequestPartition] = f(Array(OffsetCommitRequestPartition))


@schema
class OffsetCommitRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 9)
    FLEXIBLE = 8
    group_id: str = f(STRING)
    generation_id_or_member_epoch: int = f(INT32, "1+", default=-1)
    member_id: str = f(STRING, "1+")
    group_instance_id: str | None = f(STRING, "7+", default=None)
    retention_time_ms: int = f(INT64, "2-4", default=-1)
    topics: list[OffsetCommitRequestTopic] = f(Array(OffsetCommitRequestTopic))


@schema
class OffsetCommitResponsePartition(Struct):
    partition_index: int = f(INT32)
    error_code: int = f(INT16)


@schema
class OffsetCommitResponseTopic(Struct):
    name: str = f(STRING)
    partitions: list[OffsetCommitResponsePartition] = f(Array(OffsetCommitResponsePartition))


@schema
class OffsetCommitResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 9)
    FLEXIBLE = 8
    throttle_time_ms: int = f(INT32, "3+")
    topics: list[OffsetCommitResponseTopic] = f(Array(OffsetCommitResponseTopic))
