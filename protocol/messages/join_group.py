"""JoinGroup (key 11): a consumer joins a group; the coordinator elects a leader and a protocol."""

from __future__ import annotations

from ..schema import BOOL, BYTES, INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 11


@schema
class JoinGroupRequestProtocol(Struct):
    name: str = f(STRING)
    metadata: bytes = f(BYTES)


@schema
class JoinGroupRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 9)
    FLEXIBLE = 6
    group_id: str = f(STRING)
    session_timeout_ms: int = f(INT32)
    rebalance_timeout_ms: int = f(INT32, "1+", default=-1)
    member_id: str = f(STRING)
    group_instance_id: str | None = f(STRING, "5+", default=None)
    protocol_type: str = f(STRING)
    protocols: list[JoinGroupRequestProtocol] = f(Array(JoinGroupRequestProtocol))
    reason: str | None = f(STRING, "8+", default=None)


@schema
class JoinGroupResponseMember(Struct):
    member_id: str = f(STRING)
    group_instance_id: str | None = f(STRING, "5+", default=None)
    metadata: bytes = f(BYTES)


@schema
class JoinGroupResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 9)
    FLEXIBLE = 6
    throttle_time_ms: int = f(INT32, "2+")
    error_code: int = f(INT16)
    generation_id: int = f(INT32, default=-1)
    protocol_type: str | None = f(STRING, "7+", default=None)
    protocol_name: str | None = f(STRING)
    leader: str = f(STRING)
    skip_assignment: bool = f(BOOL, "9+", default=False)
    member_id: str = f(STRING)
    members: list[JoinGroupResponseMember] = f(Array(JoinGroupResponseMember))
