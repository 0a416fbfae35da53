"""LeaveGroup (13): members leave at once instead of waiting out their session timeout.

Before v3 one member leaves and the answer has only a top-level error; from v3 a batch of
members (possibly named only by group instance id, the admin path) with an error each.
"""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberResponse

from ..context import BrokerContext, ClientInfo

KEY = 13
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: LeaveGroupRequest) -> LeaveGroupResponse:
    await ctx.groups.ensure_topic()
    if header.api_version < 3:
        top, errors = ctx.groups.leave(req.group_id, [(req.member_id, None)])
        if not top and errors:
            top = errors[0]
        return LeaveGroupResponse(error_code=top)
    leaving = [(m.member_id, m.group_instance_id) for m in req.members]
    top, errors = ctx.groups.leave(req.group_id, leaving)
    members = [] if top else [
        MemberResponse(member_id=mid, group_instance_id=iid, error_code=err)
        for (mid, iid), err in zip(leaving, errors, strict=True)
    ]
    return LeaveGroupResponse(error_code=top, members=members)
