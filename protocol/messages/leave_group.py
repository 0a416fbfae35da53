"""LeaveGroup (key 13): one or more members leave a consumer group."""

from __future__ import annotations

from ..schema import INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 13


@schema
class MemberIdentity(Struct):
    member_id: str = f(STRING, "3+")
    group_instance_id: str | None = f(STRING, "3+", default=None)
    reason: str | None = f(STRING, "5+", default=None)


@schema
class LeaveGroupRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 5)
    FLEXIBLE = 4
    group_id: str = f(STRING)
    member_id: str = f(STRING, "0-2")
    members: list[MemberIdentity] = f(Array(MemberIdentity), "3+")


@schema
class MemberResponse(Struct):
    member_id: str = f(STRING, "3+")
    group_instance_id: str | None = f(STRING, "3+")
    error_code: int = f(INT16, "3+")


@schema
class LeaveGroupResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 5)
    FLEXIBLE = 4
    throttle_time_ms: int = f(INT32, "1+")
    error_code: int = f(INT16)
    members: list[MemberResponse] = f(Array(MemberResponse), "3+")
