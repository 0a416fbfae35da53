"""ApiVersions (key 18): the first request of every client; how versions get negotiated."""

from __future__ import annotations

from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Message, Struct, f, schema

KEY = 18


@schema
class ApiVersionsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 4)
    FLEXIBLE = 3
    client_software_name: str = f(STRING, "3+")
    client_software_version: str = f(STRING, "3+")


@schema
class ApiVersion(Struct):
    api_key: int = f(INT16)
    min_version: int = f(INT16)
    max_version: int = f(INT16)


@schema
class SupportedFeatureKey(Struct):
    name: str = f(STRING, "3+")
    min_version: int = f(INT16, "3+")
    max_version: int = f(INT16, "3+")


@schema
class FinalizedFeatureKey(Struct):
    name: str = f(STRING, "3+")
    max_version_level: int = f(INT16, "3+")
    min_version_level: int = f(INT16, "3+")


@schema
class ApiVersionsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 4)
    FLEXIBLE = 3
    error_code: int = f(INT16)
    api_keys: list[ApiVersion] = f(Array(ApiVersion))
    throttle_time_ms: int = f(INT32, "1+")
    supported_features: list[SupportedFeatureKey] = f(Array(SupportedFeatureKey), "3+", tag=0)
    finalized_features_epoch: int = f(INT64, "3+", tag=1, default=-1)
    finalized_features: list[FinalizedFeatureKey] = f(Array(FinalizedFeatureKey), "3+", tag=2)
    zk_migration_ready: bool = f(BOOL, "3+", tag=3, default=False)
