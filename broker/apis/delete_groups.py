"""DeleteGroups (42): remove Empty groups and their committed offsets (tombstones in the log)."""

from __future__ import annotations

from protocol.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.delete_groups import DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse

from ..context import BrokerContext, ClientInfo

KEY = 42
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    await ctx.groups.ensure_topic()
    allowed = ctx.authorizer.allowed(client, AclOperation.DELETE, ResourceType.GROUP, req.groups_names)
    results = ctx.groups.delete_groups([g for g in req.groups_names if g in allowed])
    results.update({g: ErrorCode.GROUP_AUTHORIZATION_FAILED for g in req.groups_names if g not in allowed})
    return DeleteGroupsResponse(results=[DeletableGroupResult(group_id=g, error_code=results[g])
                                         for g in req.groups_names])
