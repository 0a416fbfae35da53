"""ListGroups (key 16): list the groups a broker coordinates, optionally filtered by state/type."""

from __future__ import annotations

from ..schema import INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 16


@schema
class ListGroupsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 5)
    FLEXIBLE = 3
    states_filter: list[str] = f(Array(STRING), "4+")
    types_filter: list[str] = f(Array(STRING), "5+")


@schema
class ListedGroup(Struct):
    group_id: str = f(STRING)
    protocol_type: str = f(STRING)
    group_state: str = f(STRING, "4+")
    group_type: str = f(STRING, "5+")


@schema
class ListGroupsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 5)
    FLEXIBLE = 3
    throttle_time_ms: int = f(INT32, "1+")
    error_code: int = f(INT16)
    groups: list[ListedGroup] = f(Array(ListedGroup))
