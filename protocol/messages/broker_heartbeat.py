"""BrokerHeartbeat (key 63): a registered broker's periodic sign of life, carrying how far it has
applied the metadata log; the controller answers whether it is caught up and fenced."""

from __future__ import annotations

import uuid

from ..schema import BOOL, INT16, INT32, INT64, UUID, Array, Message, f, schema

KEY = 63


@schema
class BrokerHeartbeatRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 1)
    FLEXIBLE = 0
    broker_id: int = f(INT32)
    broker_epoch: int = f(INT64, default=-1)
    current_metadata_offset: int = f(INT64)
    want_fence: bool = f(BOOL)
    want_shut_down: bool = f(BOOL)
    offline_log_dirs: list[uuid.UUID] = f(Array(UUID), "1+", tag=0, tagged="1+")


@schema
class BrokerHeartbeatResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 1)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    is_caught_up: bool = f(BOOL)
    is_fenced: bool = f(BOOL, default=True)
    should_shut_down: bool = f(BOOL)
