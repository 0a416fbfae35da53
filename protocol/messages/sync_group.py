"""SyncGroup (key 14): the group leader hands out assignments, which every member receives."""

from __future__ import annotations

from ..schema import BYTES, INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 14


@schema
class SyncGroupRequestAssignment(Struct):
    member_id: str = f(STRING)
    assignment: bytes = f(BYTES)


@schema
class SyncGroupRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 5)
    FLEXIBLE = 4
    group_id: str = f(STRING)
    generation_id: int = f(INT32)
    member_id: str = f(STRING)
    group_instance_id: str | None = f(STRING, "3+", default=None)
    protocol_type: str | None = f(STRING, "5+", default=None)
    protocol_name: str | None = f(STRING, "5+", default=None)
    assignments: list[SyncGroupRequestAssignment] = f(Array(SyncGroupRequestAssignment))


@schema
class SyncGroupResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 5)
    FLEXIBLE = 4
    throttle_time_ms: int = f(INT32, "1+")
    error_code: int = f(INT16)
    protocol_type: str | None = f(STRING, "5+", default=None)
    protocol_name: str | None = f(STRING, "5+", default=None)
    assignment: bytes = f(BYTES)
