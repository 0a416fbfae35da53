"""DeleteGroups (key 42): delete empty consumer groups and their committed offsets."""

from __future__ import annotations

from ..schema import INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 42


@schema
class DeleteGroupsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    groups_names: list[str] = f(Array(STRING))


@schema
class DeletableGroupResult(Struct):
    group_id: str = f(STRING)
    error_code: int = f(INT16)


@schema
class DeleteGroupsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    throttle_time_ms: int = f(INT32)
    results: list[DeletableGroupResult] = f(Array(DeletableGroupResult))
