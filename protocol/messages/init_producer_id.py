"""InitProducerId (key 22): allot a producer id and epoch for idempotent or transactional producing."""

from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, Message, f, schema

KEY = 22


@schema
class InitProducerIdRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 5)
    FLEXIBLE = 2
    transactional_id: str | None = f(STRING)
    transaction_timeout_ms: int = f(INT32)
    producer_id: int = f(INT64, "3+", default=-1)
    producer_epoch: int = f(INT16, "3+", default=-1)


@schema
class InitProducerIdResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 5)
    FLEXIBLE = 2
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    producer_id: int = f(INT64, default=-1)
    producer_epoch: int = f(INT16)
