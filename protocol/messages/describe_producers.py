"""DescribeProducers (key 61): active producers (idempotent/transactional state) of partitions."""

from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, Array, Message, Struct, f, schema

KEY = 61


@schema
class TopicRequest(Struct):
    name: str = f(STRING)
    partition_indexes: list[int] = f(Array(INT32))


@schema
class DescribeProducersRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    topics: list[TopicRequest] = f(Array(TopicRequest))


@schema
class ProducerState(Struct):
    producer_id: int = f(INT64)
    producer_epoch: int = f(INT32)
    last_sequence: int = f(INT32, default=-1)
    last_timestamp: int = f(INT64, default=-1)
    coordinator_epoch: int = f(INT32)
    current_txn_start_offset: int = f(INT64, default=-1)


@schema
class PartitionResponse(Struct):
    partition_index: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    active_producers: list[ProducerState] = f(Array(ProducerState))


@schema
class TopicResponse(Struct):
    name: str = f(STRING)
    partitions: list[PartitionResponse] = f(Array(PartitionResponse))


@schema
class DescribeProducersResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    topics: list[TopicResponse] = f(Array(TopicResponse))
