"""TxnOffsetCommit (key 28): commit a consumer group's offsets as part of a transaction."""

from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, Array, Message, Struct, f, schema

KEY = 28


@schema
class TxnOffsetCommitRequestPartition(Struct):
    partition_index: int = f(INT32)
    committed_offset: int = f(INT64)
    committed_leader_epoch: int = f(INT32, "2+", default=-1)
    committed_metadata: str | None = f(STRING)


@schema
class TxnOffsetCommitRequestTopic(Struct):
    name: str = f(STRING)
    partitions: list[TxnOffsetCommitRequestPartition] = f(Array(TxnOffsetCommitRequestPartition))


@schema
class TxnOffsetCommitRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 4)
    FLEXIBLE = 3
    transactional_id: str = f(STRING)
    group_id: str = f(STRING)
    producer_id: int = f(INT64)
    producer_epoch: int = f(INT16)
    generation_id: int = f(INT32, "3+", default=-1)
    member_id: str = f(STRING, "3+", default="")
    group_instance_id: str | None = f(STRING, "3+", default=None)
    topics: list[TxnOffsetCommitRequestTopic] = f(Array(TxnOffsetCommitRequestTopic))


@schema
class TxnOffsetCommitResponsePartition(Struct):
    partition_index: int = f(INT32)
    error_code: int = f(INT16)


@schema
class TxnOffsetCommitResponseTopic(Struct):
    name: str = f(STRING)
    partitions: list[TxnOffsetCommitResponsePartition] = f(Array(TxnOffsetCommitResponsePartition))


@schema
class TxnOffsetCommitResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 4)
    FLEXIBLE = 3
    throttle_time_ms: int = f(INT32)
    topics: list[TxnOffsetCommitResponseTopic] = f(Array(TxnOffsetCommitResponseTopic))
