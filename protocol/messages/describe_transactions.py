"""DescribeTransactions (key 65): state of transactional ids, as the coordinator sees it."""

from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, Array, Message, Struct, f, schema

KEY = 65


@schema
class DescribeTransactionsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    transactional_ids: list[str] = f(Array(STRING))


@schema
class TopicData(Struct):
    topic: str = f(STRING)
    partitions: list[int] = f(Array(INT32))


@schema
class TransactionState(Struct):
    error_code: int = f(INT16)
    transactional_id: str = f(STRING)
    transaction_state: str = f(STRING)
    transaction_timeout_ms: int = f(INT32)
    transaction_start_time_ms: int = f(INT64)
    producer_id: int = f(INT64)
    producer_epoch: int = f(INT16)
    topics: list[TopicData] = f(Array(TopicData))


@schema
class DescribeTransactionsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    transaction_states: list[TransactionState] = f(Array(TransactionState))
