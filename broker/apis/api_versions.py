"""ApiVersions (18): our advertised ranges, from the one table in protocol/supported.py."""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.supported import CONTROLLER_SUPPORTED, api_versions_table

from ..context import BrokerContext, ClientInfo, ControllerContext

KEY = 18
ORDERED = False


async def handle(ctx: BrokerContext | ControllerContext, client: ClientInfo, header: RequestHeader,
                 req: ApiVersionsRequest) -> ApiVersionsResponse:
    table = CONTROLLER_SUPPORTED if isinstance(ctx, ControllerContext) else None  # each listener lists what it serves
    return ApiVersionsResponse(error_code=0, api_keys=api_versions_table(table), throttle_time_ms=0)
