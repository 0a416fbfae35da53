"""DeleteAcls (key 31): remove the ACL bindings each filter selects; each filter is answered
with the bindings it removed."""

from __future__ import annotations

from ..schema import INT8, INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 31
LITERAL = 3  # PatternType before v1


@schema
class DeleteAclsFilter(Struct):
    resource_type_filter: int = f(INT8)
    resource_name_filter: str | None = f(STRING, default=None)
    pattern_type_filter: int = f(INT8, "1+", default=LITERAL)
    principal_filter: str | None = f(STRING, default=None)
    host_filter: str | None = f(STRING, default=None)
    operation: int = f(INT8)
    permission_type: int = f(INT8)


@schema
class DeleteAclsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 3)
    FLEXIBLE = 2
    filters: list[DeleteAclsFilter] = f(Array(DeleteAclsFilter))


@schema
class DeleteAclsMatchingAcl(Struct):
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    resource_type: int = f(INT8)
    resource_name: str = f(STRING)
    pattern_type: int = f(INT8, "1+", default=LITERAL)
    principal: str = f(STRING)
    host: str = f(STRING)
    operation: int = f(INT8)
    permission_type: int = f(INT8)


@schema
class DeleteAclsFilterResult(Struct):
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    matching_acls: list[DeleteAclsMatchingAcl] = f(Array(DeleteAclsMatchingAcl))


@schema
class DeleteAclsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 3)
    FLEXIBLE = 2
    throttle_time_ms: int = f(INT32)
    filter_results: list[DeleteAclsFilterResult] = f(Array(DeleteAclsFilterResult))
