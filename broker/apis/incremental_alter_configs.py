"""IncrementalAlterConfigs (44): SET/DELETE/APPEND/SUBTRACT topic config keys (broker/topic_configs.py)."""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.incremental_alter_configs import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

from ..context import BrokerContext, ClientInfo
from ..topic_configs import ConfigOp, ConfigResource, alter

KEY = 44
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    resources = [ConfigResource(r.resource_type, r.resource_name,
                                tuple(ConfigOp(c.name, c.value, c.config_operation) for c in r.configs))
                 for r in req.resources]
    results = await alter(ctx.topics, ctx.node_id, resources, incremental=True, validate_only=req.validate_only)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=[
        AlterConfigsResourceResponse(error_code=code, error_message=msg, resource_type=r.type, resource_name=r.name)
        for r, (code, msg) in zip(resources, results, strict=True)])
