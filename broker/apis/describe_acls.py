"""DescribeAcls (29): DESCRIBE on the cluster; the bindings the filter selects, from this
broker's metadata image, grouped by resource pattern."""

from __future__ import annotations

from protocol.acl import CLUSTER_NAME, AclOperation, ResourceType, describe_resources, filter_of
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse

from ..context import BrokerContext, ClientInfo

KEY = 29
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DescribeAclsRequest) -> DescribeAclsResponse:
    if not ctx.authorizer.enabled:
        return DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED, error_message="No Authorizer is configured.")
    if not ctx.authorizer.allows(client, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return DescribeAclsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    error_message="Cluster authorization failed.")
    flt = filter_of(req)
    problem = flt.problem()
    if problem is not None:
        return DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=problem)
    chosen = [b for b in ctx.topics.image.acls.values() if flt.matches(b)]
    return DescribeAclsResponse(throttle_time_ms=0, error_code=0, resources=describe_resources(chosen))
