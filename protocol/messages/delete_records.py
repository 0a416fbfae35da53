"""DeleteRecords (key 21): move partitions' log start offsets forward (kafka-delete-records)."""

from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, Array, Message, Struct, f, schema

KEY = 21


@schema
class DeleteRecordsPartition(Struct):
    partition_index: int = f(INT32)
    offset: int = f(INT64)  # records below it are deleted; -1 means the high watermark


@schema
class DeleteRecordsTopic(Struct):
    name: str = f(STRING)
    partitions: list[DeleteRecordsPartition] = f(Array(DeleteRecordsPartition))


@schema
class DeleteRecordsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    topics: list[DeleteRecordsTopic] = f(Array(DeleteRecordsTopic))
    timeout_ms: int = f(INT32)


@schema
class DeleteRecordsPartitionResult(Struct):
    partition_index: int = f(INT32)
    low_watermark: int = f(INT64)
    error_code: int = f(INT16)


@schema
class DeleteRecordsTopicResult(Struct):
    name: str = f(STRING)
    partitions: list[DeleteRecordsPartitionResult] = f(Array(DeleteRecordsPartitionResult))


@schema
class DeleteRecordsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    throttle_time_ms: int = f(INT32)
    topics: list[DeleteRecordsTopicResult] = f(Array(DeleteRecordsTopicResult))
