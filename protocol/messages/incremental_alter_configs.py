"""IncrementalAlterConfigs (key 44): SET, DELETE, APPEND or SUBTRACT single config keys of a resource."""

from __future__ import annotations

from ..schema import BOOL, INT8, INT32, STRING, Array, Message, Struct, f, schema
from .alter_configs import AlterConfigsResourceResponse  # the same per-resource answer

KEY = 44


@schema
class AlterableConfig(Struct):
    name: str = f(STRING)
    config_operation: int = f(INT8)  # 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT
    value: str | None = f(STRING, default=None)


@schema
class AlterConfigsResource(Struct):
    resource_type: int = f(INT8)
    resource_name: str = f(STRING)
    configs: list[AlterableConfig] = f(Array(AlterableConfig))


@schema
class IncrementalAlterConfigsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 1)
    FLEXIBLE = 1
    resources: list[AlterConfigsResource] = f(Array(AlterConfigsResource))
    validate_only: bool = f(BOOL)


@schema
class IncrementalAlterConfigsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 1)
    FLEXIBLE = 1
    throttle_time_ms: int = f(INT32)
    responses: list[AlterConfigsResourceResponse] = f(Array(AlterConfigsResourceResponse))
