"""AddPartitionsToTxn (key 24): register partitions with an ongoing transaction before writing."""

from __future__ import annotations

from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Message, Struct, f, schema

KEY = 24


@schema
class AddPartitionsToTxnTopic(Struct):
    name: str = f(STRING)
    partitions: list[int] = f(Array(INT32))


@schema
class AddPartitionsToTxnTransaction(Struct):
    transactional_id: str = f(STRING, "4+")
    producer_id: int = f(INT64, "4+")
    producer_epoch: int = f(INT16, "4+")
    verify_only: bool = f(BOOL, "4+", default=False)
    topics: list[AddPartitionsToTxnTopic] = f(Array(AddPartitionsToTxnTopic), "4+")


@schema
class AddPartitionsToTxnRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 5)
    FLEXIBLE = 3
    transactions: list[AddPartitionsToTxnTransaction] = f(Array(AddPartitionsToTxnTransaction), "4+")
    v3_and_below_transactional_id: str = f(STRING, "0-3")
    v3_and_below_producer_id: int = f(INT64, "0-3")
    v3_and_below_producer_epoch: int = f(INT16, "0-3")
    v3_and_below_topics: list[AddPartitionsToTxnTopic] = f(Array(AddPartitionsToTxnTopic), "0-3")


@schema
class AddPartitionsToTxnPartitionResult(Struct):
    partition_index: int = f(INT32)
    partition_error_code: int = f(INT16)


@schema
class AddPartitionsToTxnTopicResult(Struct):
    name: str = f(STRING)
    results_by_partition: list[AddPartitionsToTxnPartitionResult] = f(Array(AddPartitionsToTxnPartitionResult))


@schema
class AddPartitionsToTxnResult(Struct):
    transactional_id: str = f(STRING, "4+")
    topic_results: list[AddPartitionsToTxnTopicResult] = f(Array(AddPartitionsToTxnTopicResult), "4+")


@schema
class AddPartitionsToTxnResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 5)
    FLEXIBLE = 3
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16, "4+")
    results_by_transaction: list[AddPartitionsToTxnResult] = f(Array(AddPartitionsToTxnResult), "4+")
    results_by_topic_v3_and_below: list[AddPartitionsToTxnTopicResult] = f(Array(AddPartitionsToTxnTopicResult), "0-3")
