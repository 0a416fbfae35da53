"""CreateAcls (30) and DeleteAcls (31) on the controller listener, as brokers forward them
(broker/controller/client.py): the active controller decides and answers once its entry has
committed; any other node answers NOT_CONTROLLER. The forwarding broker has checked the
requester's ALTER on the cluster; who may reach this listener at all is authentication's part."""

from __future__ import annotations

from protocol.acl import binding_of, filter_of, matching_acl_of
from protocol.errors import KafkaError
from protocol.headers import RequestHeader
from protocol.messages import create_acls as ca
from protocol.messages import delete_acls as da

from ..context import ClientInfo, ControllerContext

ORDERED = False


async def create_acls(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                      req: ca.CreateAclsRequest) -> ca.CreateAclsResponse:
    try:
        results = await ctx.shell.create_acls([binding_of(c) for c in req.creations])
    except KafkaError as e:
        results = [(int(e.code), e.message)] * len(req.creations)
    return ca.CreateAclsResponse(throttle_time_ms=0, results=[
        ca.AclCreationResult(error_code=code, error_message=msg) for code, msg in results])


async def delete_acls(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                      req: da.DeleteAclsRequest) -> da.DeleteAclsResponse:
    try:
        results = await ctx.shell.delete_acls([filter_of(f) for f in req.filters])
    except KafkaError as e:
        results = [(int(e.code), e.message, [])] * len(req.filters)
    return da.DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        da.DeleteAclsFilterResult(error_code=code, error_message=msg, matching_acls=[matching_acl_of(b) for b in bs])
        for code, msg, bs in results])
