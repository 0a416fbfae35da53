"""EndTxn (key 26): commit or abort a transaction."""

from __future__ import annotations

from ..schema import BOOL, INT16, INT32, INT64, STRING, Message, f, schema

KEY = 26


@schema
class EndTxnRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 5)
    FLEXIBLE = 3
    transactional_id: str = f(STRING)
    producer_id: int = f(INT64)
    producer_epoch: int = f(INT16)
    committed: bool = f(BOOL)


@schema
class EndTxnResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 5)
    FLEXIBLE = 3
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    producer_id: int = f(INT64, "5+", default=-1)
    producer_epoch: int = f(INT16, "5+", default=-1)
