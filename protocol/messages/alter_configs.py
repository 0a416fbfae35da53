"""AlterConfigs (key 33): replace the whole set of config overrides of a resource (the pre-KIP-339 API)."""

from __future__ import annotations

from ..schema import BOOL, INT8, INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 33


@schema
class AlterableConfig(Struct):
    name: str = f(STRING)
    value: str | None = f(STRING, default=None)


@schema
class AlterConfigsResource(Struct):
    resource_type: int = f(INT8)
    resource_name: str = f(STRING)
    configs: list[AlterableConfig] = f(Array(AlterableConfig))


@schema
class AlterConfigsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    resources: list[AlterConfigsResource] = f(Array(AlterConfigsResource))
    validate_only: bool = f(BOOL)


@schema
class AlterConfigsResourceResponse(Struct):
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    resource_type: int = f(INT8)
    resource_name: str = f(STRING)


@schema
class AlterConfigsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    throttle_time_ms: int = f(INT32)
    responses: list[AlterConfigsResourceResponse] = f(Array(AlterConfigsResourceResponse))
