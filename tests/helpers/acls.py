"""ACLs for the tests of issue 27, sent as raw CreateAcls / DeleteAcls / DescribeAcls to one
broker's port (a listener whose principal may ALTER the cluster: a super user's)."""

from __future__ import annotations

from protocol.acl import (
    AclBinding,
    AclFilter,
    AclPermissionType,
    PatternType,
    creation_of,
    delete_filter_of,
    describe_request_of,
    described,
)
from protocol.errors import ErrorCode
from protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from protocol.messages.describe_acls import DescribeAclsResponse

from .raw import Raw
from .wait import wait_until

ANONYMOUS = "User:ANONYMOUS"
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(rtype: int, name: str, op: int, perm: int = ALLOW, principal: str = ANONYMOUS,
        pattern: int = PatternType.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def _ask(port: int, req: CreateAclsRequest | DeleteAclsRequest) -> CreateAclsResponse | DeleteAclsResponse | None:
    """The answer, or None while it is NOT_CONTROLLER (a quorum election under way): retried, as
    every client retries it."""
    raw = Raw(port)
    try:
        resp = raw.request(req, 3)
    finally:
        raw.close()
    assert isinstance(resp, CreateAclsResponse | DeleteAclsResponse)
    results = resp.results if isinstance(resp, CreateAclsResponse) else resp.filter_results
    return None if any(r.error_code == ErrorCode.NOT_CONTROLLER for r in results) else resp


def create_acls(port: int, *bindings: AclBinding) -> None:
    req = CreateAclsRequest(creations=[creation_of(b) for b in bindings])
    resp = wait_until(lambda: _ask(port, req), timeout=30, message="CreateAcls answered")
    assert isinstance(resp, CreateAclsResponse) and [r.error_code for r in resp.results] == [0] * len(bindings), resp


def delete_acl(port: int, b: AclBinding) -> None:
    req = DeleteAclsRequest(filters=[delete_filter_of(AclFilter(
        b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation, b.permission))])
    resp = wait_until(lambda: _ask(port, req), timeout=30, message="DeleteAcls answered")
    assert isinstance(resp, DeleteAclsResponse) and len(resp.filter_results[0].matching_acls) == 1, resp


def listed(port: int) -> list[AclBinding]:
    """The ACLs broker `port`'s image has (DescribeAcls answers from it)."""
    raw = Raw(port)
    try:
        resp = raw.request(describe_request_of(AclFilter()), 3)
    finally:
        raw.close()
    assert isinstance(resp, DescribeAclsResponse) and resp.error_code == 0, resp
    return described(resp.resources)
