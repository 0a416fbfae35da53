"""DescribeGroups (key 15): state, protocol and members of consumer groups."""

from __future__ import annotations

from ..schema import BOOL, BYTES, INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 15


@schema
class DescribeGroupsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 5)
    FLEXIBLE = 5
    groups: list[str] = f(Array(STRING))
    include_authorized_operations: bool = f(BOOL, "3+")


@schema
class DescribedGroupMember(Struct):
    member_id: str = f(STRING)
    group_instance_id: str | None = f(STRING, "4+", default=None)
    client_id: str = f(STRING)
    client_host: str = f(STRING)
    member_metadata: bytes = f(BYTES)
    member_assignment: bytes = f(BYTES)


@schema
class DescribedGroup(Struct):
    error_code: int = f(INT16)
    group_id: str = f(STRING)
    group_state: str = f(STRING)
    protocol_type: str = f(STRING)
    protocol_data: str = f(STRING)
    members: list[DescribedGroupMember] = f(Array(DescribedGroupMember))
    authorized_operations: int = f(INT32, "3+", default=-2147483648)


@schema
class DescribeGroupsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 5)
    FLEXIBLE = 5
    throttle_time_ms: int = f(INT32, "1+")
    groups: list[DescribedGroup] = f(Array(DescribedGroup))
