"""AllocateProducerIds (key 67): a broker asks the active controller for a block of producer ids."""

from __future__ import annotations

from ..schema import INT16, INT32, INT64, Message, f, schema

KEY = 67


@schema
class AllocateProducerIdsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    broker_id: int = f(INT32)
    broker_epoch: int = f(INT64, default=-1)


@schema
class AllocateProducerIdsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    producer_id_start: int = f(INT64)
    producer_id_len: int = f(INT32)
