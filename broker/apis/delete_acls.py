"""DeleteAcls (31): ALTER on the cluster; decided by the active controller (forwarded when it is
elsewhere), stored as RemoveAccessControlEntryRecords, answered once this broker's image no
longer has the bindings removed."""

from __future__ import annotations

from protocol.acl import filter_of, matching_acl_of
from protocol.errors import KafkaError
from protocol.headers import RequestHeader
from protocol.messages.delete_acls import DeleteAclsFilterResult, DeleteAclsRequest, DeleteAclsResponse

from ..context import BrokerContext, ClientInfo
from .create_acls import refusal

KEY = 31
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DeleteAclsRequest) -> DeleteAclsResponse:
    filters = [filter_of(f) for f in req.filters]
    refused = refusal(ctx, client)
    if refused is not None:
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            DeleteAclsFilterResult(error_code=refused[0], error_message=refused[1]) for _ in filters])
    assert ctx.controller_client is not None
    try:
        results = await ctx.controller_client.delete_acls(filters)
        removed = {b for _, _, bs in results for b in bs}
        await ctx.topics.wait_for(lambda: not removed & set(ctx.topics.image.acls.values()), "ACLs")
    except KafkaError as e:
        results = [(int(e.code), e.message, [])] * len(filters)
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        DeleteAclsFilterResult(error_code=code, error_message=msg, matching_acls=[matching_acl_of(b) for b in bs])
        for code, msg, bs in results])
