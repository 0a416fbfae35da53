"""AddOffsetsToTxn (key 25): bring a consumer group's offsets commit into a transaction."""

from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, Message, f, schema

KEY = 25


@schema
class AddOffsetsToTxnRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 4)
    FLEXIBLE = 3
    transactional_id: str = f(STRING)
    producer_id: int = f(INT64)
    producer_epoch: int = f(INT16)
    group_id: str = f(STRING)


@schema
class AddOffsetsToTxnResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 4)
    FLEXIBLE = 3
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
