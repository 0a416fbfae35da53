"""SyncGroup (14): the leader hands in the assignment; every member waits for its own part."""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

from ..context import BrokerContext, ClientInfo
from ..group.model import SyncRequest

KEY = 14
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: SyncGroupRequest) -> SyncGroupResponse:
    v = header.api_version
    result = await ctx.groups.sync(SyncRequest(
        group_id=req.group_id,
        generation_id=req.generation_id,
        member_id=req.member_id,
        group_instance_id=req.group_instance_id if v >= 3 else None,
        protocol_type=req.protocol_type if v >= 5 else None,
        protocol_name=req.protocol_name if v >= 5 else None,
        assignments={a.member_id: a.assignment for a in req.assignments},
    ))
    return SyncGroupResponse(error_code=result.error, protocol_type=result.protocol_type,
                             protocol_name=result.protocol_name, assignment=result.assignment)
