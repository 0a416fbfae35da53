"""DescribeUserScramCredentials (50): which SCRAM mechanisms each user has a credential for, and
its iteration count — never a salt or a key — from this broker's metadata image, as Kafka's
brokers answer it. A user named but without a credential gets RESOURCE_NOT_FOUND; a user named
twice, DUPLICATE_RESOURCE."""

from __future__ import annotations

from collections import Counter

from protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.user_scram_credentials import (
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)

from ..context import BrokerContext, ClientInfo

KEY = 50
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
    if not ctx.authorizer.allows(client, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return DescribeUserScramCredentialsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                    error_message="Cluster authorization failed.", results=[])
    scram = ctx.topics.image.scram
    by_user: dict[str, list[CredentialInfo]] = {}
    for (user, mech), cred in sorted(scram.items()):
        by_user.setdefault(user, []).append(CredentialInfo(mechanism=mech, iterations=cred.iterations))
    if not req.users:  # null or empty: every user
        return DescribeUserScramCredentialsResponse(results=[
            DescribeUserScramCredentialsResult(user=u, error_code=0, credential_infos=infos)
            for u, infos in by_user.items()])
    named = Counter(u.name for u in req.users)
    out = []
    for name in named:
        if named[name] > 1:
            out.append(DescribeUserScramCredentialsResult(user=name, error_code=ErrorCode.DUPLICATE_RESOURCE,
                                                          error_message=f"Cannot describe SCRAM credentials for "
                                                                        f"the same user twice in a single request: {name}"))
        elif name not in by_user:
            out.append(DescribeUserScramCredentialsResult(user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                                          error_message=f"Attempt to describe a user credential "
                                                                        f"that does not exist: {name}"))
        else:
            out.append(DescribeUserScramCredentialsResult(user=name, error_code=0, credential_infos=by_user[name]))
    return DescribeUserScramCredentialsResponse(results=out)
