"""DescribeConfigs (key 32): read the configuration of topics and brokers."""

from __future__ import annotations

from ..schema import BOOL, INT8, INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 32


@schema
class DescribeConfigsResource(Struct):
    resource_type: int = f(INT8)
    resource_name: str = f(STRING)
    configuration_keys: list[str] | None = f(Array(STRING))


@schema
class DescribeConfigsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 4)
    FLEXIBLE = 4
    resources: list[DescribeConfigsResource] = f(Array(DescribeConfigsResource))
    include_synonyms: bool = f(BOOL, "1+", default=False)
    include_documentation: bool = f(BOOL, "3+", default=False)


@schema
class DescribeConfigsSynonym(Struct):
    name: str = f(STRING, "1+")
    value: str | None = f(STRING, "1+")
    source: int = f(INT8, "1+")


@schema
class DescribeConfigsResourceResult(Struct):
    name: str = f(STRING)
    value: str | None = f(STRING)
    read_only: bool = f(BOOL)
    is_default: bool = f(BOOL, "0")
    config_source: int = f(INT8, "1+", default=-1)
    is_sensitive: bool = f(BOOL)
    synonyms: list[DescribeConfigsSynonym] = f(Array(DescribeConfigsSynonym), "1+")
    config_type: int = f(INT8, "3+", default=0)
    documentation: str | None = f(STRING, "3+")


@schema
class DescribeConfigsResult(Struct):
    error_code: int = f(INT16)
    error_message: str | None = f(STRING)
    resource_type: int = f(INT8)
    resource_name: str = f(STRING)
    configs: list[DescribeConfigsResourceResult] = f(Array(DescribeConfigsResourceResult))


@schema
class DescribeConfigsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 4)
    FLEXIBLE = 4
    throttle_time_ms: int = f(INT32)
    results: list[DescribeConfigsResult] = f(Array(DescribeConfigsResult))
