"""CreateAcls (30): ALTER on the cluster; decided by the active controller (forwarded when it is
elsewhere), stored as AccessControlEntryRecords, answered once this broker's image has them.
Without the authorizer: SECURITY_DISABLED, as Kafka answers without authorizer.class.name."""

from __future__ import annotations

from protocol.acl import CLUSTER_NAME, AclOperation, ResourceType, binding_of
from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages.create_acls import AclCreationResult, CreateAclsRequest, CreateAclsResponse

from ..context import BrokerContext, ClientInfo

KEY = 30
ORDERED = False


def refusal(ctx: BrokerContext, client: ClientInfo) -> tuple[ErrorCode, str] | None:
    """Why a change of ACLs (CreateAcls, DeleteAcls) is refused to `client`, or None."""
    if not ctx.authorizer.enabled:
        return ErrorCode.SECURITY_DISABLED, "No Authorizer is configured."
    if not ctx.authorizer.allows(client, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    if ctx.controller_client is None:
        return ErrorCode.NOT_CONTROLLER, "no controller"
    return None


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: CreateAclsRequest) -> CreateAclsResponse:
    bindings = [binding_of(c) for c in req.creations]
    refused = refusal(ctx, client)
    if refused is not None:
        return CreateAclsResponse(throttle_time_ms=0, results=[
            AclCreationResult(error_code=refused[0], error_message=refused[1]) for _ in bindings])
    assert ctx.controller_client is not None
    try:
        results = await ctx.controller_client.create_acls(bindings)
        created = {b for b, (code, _) in zip(bindings, results, strict=True) if not code}
        await ctx.topics.wait_for(lambda: created <= set(ctx.topics.image.acls.values()), "ACLs")
    except KafkaError as e:
        results = [(int(e.code), e.message)] * len(bindings)
    return CreateAclsResponse(throttle_time_ms=0, results=[
        AclCreationResult(error_code=code, error_message=msg) for code, msg in results])
