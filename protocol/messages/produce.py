"""Produce (key 0): a producer appends record batches to partition logs."""

from __future__ import annotations

from ..schema import INT16, INT32, INT64, RECORDS, STRING, Array, Message, Struct, f, schema

KEY = 0


@schema
class PartitionProduceData(Struct):
    index: int = f(INT32)
    records: bytes | memoryview | None = f(RECORDS)


@schema
class TopicProduceData(Struct):
    name: str = f(STRING)
    partition_data: list[PartitionProduceData] = f(Array(PartitionProduceData))


@schema
class ProduceRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 11)
    FLEXIBLE = 9
    transactional_id: str | None = f(STRING, "3+", default=None)
    acks: int = f(INT16)
    timeout_ms: int = f(INT32)
    topic_data: list[TopicProduceData] = f(Array(TopicProduceData))


@schema
class BatchIndexAndErrorMessage(Struct):
    batch_index: int = f(INT32, "8+")
    batch_index_error_message: str | None = f(STRING, "8+", default=None)


@schema
class LeaderIdAndEpoch(Struct):
    leader_id: int = f(INT32, "10+", default=-1)
    leader_epoch: int = f(INT32, "10+", default=-1)


@schema
class PartitionProduceResponse(Struct):
    index: int = f(INT32)
    error_code: int = f(INT16)
    base_offset: int = f(INT64)
    log_append_time_ms: int = f(INT64, "2+", default=-1)
    log_start_offset: int = f(INT64, "5+", default=-1)
    record_errors: list[BatchIndexAndErrorMessage] = f(Array(BatchIndexAndErrorMessage), "8+")
    error_message: str | None = f(STRING, "8+", default=None)
    current_leader: LeaderIdAndEpoch = f(LeaderIdAndEpoch, "10+", tag=0)


@schema
class TopicProduceResponse(Struct):
    name: str = f(STRING)
    partition_responses: list[PartitionProduceResponse] = f(Array(PartitionProduceResponse))


@schema
class NodeEndpoint(Struct):
    node_id: int = f(INT32, "10+")
    host: str = f(STRING, "10+")
    port: int = f(INT32, "10+")
    rack: str | None = f(STRING, "10+", default=None)


@schema
class ProduceResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 11)
    FLEXIBLE = 9
    responses: list[TopicProduceResponse] = f(Array(TopicProduceResponse))
    throttle_time_ms: int = f(INT32, "1+", default=0)
    node_endpoints: list[NodeEndpoint] = f(Array(NodeEndpoint), "10+", tag=0)
