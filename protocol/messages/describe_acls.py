"""DescribeAcls (key 29): the ACL bindings a filter selects, grouped by resource pattern."""

from __future__ import annotations

from ..schema import INT8, INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 29
LITERAL = 3  # PatternType before v1 (which has no pattern type field)


@schema
class DescribeAclsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 3)
    FLEXIBLE = 2
    resource_type_filter: int = f(INT8)
    resource_name_filter: str | None = f(STRING, default=None)
    pattern_type_filter: int = f(INT8, "1+", default=LITERAL)
    principal_filter: str | None = f(STRING, default=None)
    host_filter: str | None = f(STRING, default=None)
    operation: int = f(INT8)
    permission_type: int = f(INT8)


@schema
class AclDescription(Struct):
    principal: str = f(STRING)
    host: str = f(STRING)
    operation: int = f(INT8)
    permission_type: int = f(INT8)


@schema
class DescribeAclsResource(Struct):
    resource_type: int = f(INT8)
    resource_name: str = f(STRING)
    pattern_type: int = f(INT8, "1+", default=LITERAL)
    acls: list[AclDescription] = f(Array(AclDescription))


@schema
class DescribeAclsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 3)
    FLEXIBLE = 2
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    resources: list[DescribeAclsResource] = f(Array(DescribeAclsResource))
