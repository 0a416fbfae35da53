"""CreateAcls (key 30): add ACL bindings; one result per creation, in request order."""

from __future__ import annotations

from ..schema import INT8, INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 30
LITERAL = 3  # PatternType before v1


@schema
class AclCreation(Struct):
    resource_type: int = f(INT8)
    resource_name: str = f(STRING)
    resource_pattern_type: int = f(INT8, "1+", default=LITERAL)
    principal: str = f(STRING)
    host: str = f(STRING)
    operation: int = f(INT8)
    permission_type: int = f(INT8)


@schema
class CreateAclsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 3)
    FLEXIBLE = 2
    creations: list[AclCreation] = f(Array(AclCreation))


@schema
class AclCreationResult(Struct):
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)


@schema
class CreateAclsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 3)
    FLEXIBLE = 2
    throttle_time_ms: int = f(INT32)
    results: list[AclCreationResult] = f(Array(AclCreationResult))
