"""AlterConfigs (33): replace a topic's whole set of config overrides (broker/topic_configs.py)."""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)

from ..context import BrokerContext, ClientInfo
from ..topic_configs import ConfigOp, ConfigResource, alter

KEY = 33
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: AlterConfigsRequest) -> AlterConfigsResponse:
    resources = [ConfigResource(r.resource_type, r.resource_name, tuple(ConfigOp(c.name, c.value) for c in r.configs))
                 for r in req.resources]
    results = await alter(ctx.topics, ctx.node_id, resources, incremental=False, validate_only=req.validate_only)
    return AlterConfigsResponse(throttle_time_ms=0, responses=[
        AlterConfigsResourceResponse(error_code=code, error_message=msg, resource_type=r.type, resource_name=r.name)
        for r, (code, msg) in zip(resources, results, strict=True)])
