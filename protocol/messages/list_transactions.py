"""ListTransactions (key 66): list transactional ids known to a coordinator, with filters."""

from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, Array, Message, Struct, f, schema

KEY = 66


@schema
class ListTransactionsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 1)
    FLEXIBLE = 0
    state_filters: list[str] = f(Array(STRING))
    producer_id_filters: list[int] = f(Array(INT64))
    duration_filter: int = f(INT64, "1+", default=-1)


@schema
class TransactionState(Struct):
    transactional_id: str = f(STRING)
    producer_id: int = f(INT64)
    transaction_state: str = f(STRING)


@schema
class ListTransactionsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 1)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    unknown_state_filters: list[str] = f(Array(STRING))
    transaction_states: list[TransactionState] = f(Array(TransactionState))
