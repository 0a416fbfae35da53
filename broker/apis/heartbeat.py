"""Heartbeat (12): keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse

from ..context import BrokerContext, ClientInfo

KEY = 12
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: HeartbeatRequest) -> HeartbeatResponse:
    await ctx.groups.ensure_topic()
    instance = req.group_instance_id if header.api_version >= 3 else None
    err = ctx.groups.heartbeat(req.group_id, req.member_id, instance, req.generation_id)
    return HeartbeatResponse(error_code=err)
