"""ApiVersions (18): our advertised ranges, from the one table in protocol/supported.py."""

from __future__ import annotations

from typing import Any

from protocol.headers import RequestHeader
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

KEY = 18


async def handle(server: Any, client: Any, header: RequestHeader, req: ApiVersionsRequest) -> ApiVersionsResponse:
    from ..server import api_versions_table

    return ApiVersionsResponse(error_code=0, api_keys=api_versions_table(), throttle_time_ms=0)
