"""ListGroups (16): the groups this broker coordinates, filtered by state (v4+) and type (v5+)."""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse

from ..context import BrokerContext, ClientInfo

KEY = 16
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: ListGroupsRequest) -> ListGroupsResponse:
    v = header.api_version
    err, groups = ctx.groups.list_groups(req.states_filter if v >= 4 else None,
                                            req.types_filter if v >= 5 else None)
    return ListGroupsResponse(error_code=err, groups=[
        ListedGroup(group_id=gid, protocol_type=ptype, group_state=state, group_type="classic")
        for gid, ptype, state in groups
    ])
