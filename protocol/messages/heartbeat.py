"""Heartbeat (key 12): a group member proves it is alive and learns of rebalances."""

from __future__ import annotations

from ..schema import INT16, INT32, STRING, Message, f, schema

KEY = 12


@schema
class HeartbeatRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 4)
    FLEXIBLE = 4
    group_id: str = f(STRING)
    generation_id: int = f(INT32)
    member_id: str = f(STRING)
    group_instance_id: str | None = f(STRING, "3+", default=None)


@schema
class HeartbeatResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 4)
    FLEXIBLE = 4
    throttle_time_ms: int = f(INT32, "1+")
    error_code: int = f(INT16)
