"""DeleteGroups (42): remove Empty groups and their committed offsets (tombstones in the log)."""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.delete_groups import DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse

from ..context import BrokerContext, ClientInfo

KEY = 42
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    await ctx.groups.ensure_topic()
    results = ctx.groups.delete_groups(list(req.groups_names))
    return DeleteGroupsResponse(results=[DeletableGroupResult(group_id=g, error_code=results[g])
                                         for g in req.groups_names])
