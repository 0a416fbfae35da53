"""Issue 27 (ACLs): the authorizer's rules, decided on bindings alone (broker/security/authorizer.py)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from broker.metadata.image import MetadataImage
from broker.security.authorizer import (
    AclIndex,
    Authorizer,
    AuthorizerSettings,
    decide,
    decide_any,
    parse_super_users,
)
from protocol.acl import AclBinding, AclFilter, AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.messages.metadata_records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
    frame,
    unframe,
)

ON = AuthorizerSettings(enabled=True)
T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
ALICE, BOB = "User:alice", "User:bob"


def acl(rtype: int, name: str, op: int, perm: int = ALLOW, principal: str = ALICE, pattern: int = LIT,
        host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def may(bindings: list[AclBinding], op: int, rtype: int, name: str, principal: str = ALICE, host: str = "10.0.0.1",
        settings: AuthorizerSettings = ON) -> bool:
    return decide(settings, AclIndex(bindings), principal, host, op, rtype, name)


def test_off_allows_everything_and_on_without_acls_denies_everything() -> None:
    assert may([], Op.WRITE, T, "t", settings=AuthorizerSettings())
    assert not may([], Op.WRITE, T, "t")
    assert may([], Op.WRITE, T, "t", settings=AuthorizerSettings(True, allow_everyone_if_no_acl_found=True))


def test_literal_prefixed_and_wildcard_patterns() -> None:
    lit, pre, star = acl(T, "orders", Op.READ), acl(T, "pay-", Op.READ, pattern=PRE), acl(G, "*", Op.READ)
    assert may([lit], Op.READ, T, "orders") and not may([lit], Op.READ, T, "orders2")
    assert may([pre], Op.READ, T, "pay-eu") and may([pre], Op.READ, T, "pay-") and not may([pre], Op.READ, T, "pa")
    assert may([star], Op.READ, G, "any-group") and not may([star], Op.READ, T, "any-group")  # per resource type


def test_deny_wins_over_allow_and_all() -> None:
    bindings = [acl(T, "*", Op.ALL), acl(T, "secret", Op.READ, DENY, pattern=PRE)]
    assert may(bindings, Op.READ, T, "public")
    assert not may(bindings, Op.READ, T, "secret-1")
    assert may(bindings, Op.WRITE, T, "secret-1")  # the DENY is for READ only
    assert may(bindings, Op.DESCRIBE, T, "secret-1")  # a DENY implies nothing
    assert not may([acl(T, "t", Op.READ), acl(T, "t", Op.ALL, DENY)], Op.READ, T, "t")


@pytest.mark.parametrize(("granted", "asked", "allowed"), [
    (Op.READ, Op.DESCRIBE, True), (Op.WRITE, Op.DESCRIBE, True), (Op.DELETE, Op.DESCRIBE, True),
    (Op.ALTER, Op.DESCRIBE, True), (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, True), (Op.ALL, Op.CLUSTER_ACTION, True),
    (Op.DESCRIBE, Op.READ, False), (Op.READ, Op.WRITE, False), (Op.CREATE, Op.DESCRIBE, False),
    (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, False), (Op.ALTER, Op.ALTER_CONFIGS, False),
])
def test_implied_operations(granted: int, asked: int, allowed: bool) -> None:
    assert may([acl(T, "t", granted)], asked, T, "t") is allowed


def test_principal_and_host_must_match() -> None:
    bindings = [acl(T, "t", Op.READ, host="10.0.0.1"), acl(T, "u", Op.READ, principal="User:*")]
    assert may(bindings, Op.READ, T, "t") and not may(bindings, Op.READ, T, "t", host="10.0.0.2")
    assert not may(bindings, Op.READ, T, "t", principal=BOB)
    assert may(bindings, Op.READ, T, "u", principal=BOB)  # User:* is everyone


def test_an_acl_for_someone_else_still_counts_as_found() -> None:
    """allow.everyone.if.no.acl.found applies only where no binding applies to the resource at all."""
    settings = AuthorizerSettings(True, allow_everyone_if_no_acl_found=True)
    assert not may([acl(T, "t", Op.READ, principal=BOB)], Op.READ, T, "t", settings=settings)
    assert may([acl(T, "t", Op.READ, principal=BOB)], Op.READ, T, "other", settings=settings)


def test_super_users_may_do_anything_even_when_denied() -> None:
    settings = AuthorizerSettings(True, parse_super_users(" User:admin ; User:broker "))
    assert settings.super_users == {"User:admin", "User:broker"}
    assert may([acl(C, "kafka-cluster", Op.ALL, DENY, principal="User:admin")], Op.ALTER, C, "kafka-cluster",
               principal="User:admin", settings=settings)


def test_any_resource_of_a_type() -> None:
    """KIP-679: WRITE on some topic is enough for an idempotent producer; not when every such
    ALLOW is covered by a DENY."""
    def any_write(bindings: list[AclBinding]) -> bool:
        return decide_any(ON, AclIndex(bindings), ALICE, "h", Op.WRITE, T)
    assert any_write([acl(T, "t", Op.WRITE)]) and any_write([acl(T, "p-", Op.ALL, pattern=PRE)])
    assert not any_write([]) and not any_write([acl(T, "t", Op.READ)])
    assert not any_write([acl(T, "t", Op.WRITE), acl(T, "t", Op.WRITE, DENY)])
    assert not any_write([acl(T, "p-1", Op.WRITE), acl(T, "p-", Op.WRITE, DENY, pattern=PRE)])
    assert not any_write([acl(T, "t", Op.WRITE), acl(T, "*", Op.ALL, DENY)])
    assert any_write([acl(T, "t", Op.WRITE), acl(T, "u", Op.WRITE, DENY)])


def test_filters_select_as_describe_and_delete_acls_do() -> None:
    a, b = acl(T, "t", Op.READ), acl(T, "t-", Op.WRITE, DENY, principal=BOB, pattern=PRE)
    assert AclFilter().matches(a) and AclFilter().matches(b)
    assert AclFilter(resource_type=T, resource_name="t", pattern_type=LIT).matches(a)
    assert not AclFilter(resource_type=T, resource_name="t", pattern_type=LIT).matches(b)
    assert AclFilter(resource_name="t-x", pattern_type=PatternType.MATCH).matches(b)
    assert not AclFilter(resource_name="t-x", pattern_type=PatternType.MATCH).matches(a)
    assert AclFilter(principal=BOB, permission=DENY).matches(b) and not AclFilter(principal=BOB).matches(a)


def test_bindings_kafka_refuses_to_create() -> None:
    assert acl(T, "t", Op.READ).problem() is None
    assert acl(C, "c", Op.ALTER).problem() is not None  # CLUSTER is named kafka-cluster
    assert acl(T, "t", Op.ANY).problem() is not None
    assert AclBinding(T, "t", PatternType.MATCH, ALICE, "*", Op.READ, ALLOW).problem() is not None
    assert AclBinding(T, "t", LIT, "alice", "*", Op.READ, ALLOW).problem() is not None  # no principal type
    assert AclBinding(T, "", LIT, ALICE, "*", Op.READ, ALLOW).problem() is not None


def test_the_image_applies_acl_records_and_keeps_them_in_its_snapshot() -> None:
    i1, i2 = uuid.uuid4(), uuid.uuid4()
    image = MetadataImage()
    for n, (i, b) in enumerate([(i1, acl(T, "t", Op.READ)), (i2, acl(X, "tx-", Op.WRITE, pattern=PRE))]):
        rec = AccessControlEntryRecord(id=i, resource_type=b.resource_type, resource_name=b.resource_name,
                                       pattern_type=b.pattern_type, principal=b.principal, host=b.host,
                                       operation=b.operation, permission_type=b.permission)
        image = image.apply(n, unframe(frame(rec)))  # through Kafka's framing
    assert image.acls == {i1: acl(T, "t", Op.READ), i2: acl(X, "tx-", Op.WRITE, pattern=PRE)}
    assert MetadataImage.from_snapshot(image.to_snapshot()).acls == image.acls
    image = image.apply(3, unframe(frame(RemoveAccessControlEntryRecord(id=i1))))
    assert list(image.acls) == [i2]
    with pytest.raises(ValueError):
        image.apply(4, RemoveAccessControlEntryRecord(id=i1))


@dataclass
class _Who:
    principal: str
    peer: str


def test_the_authorizer_follows_the_bindings_it_is_given() -> None:
    current: dict[uuid.UUID, AclBinding] = {}
    authz = Authorizer(ON, lambda: current)
    alice = _Who(ALICE, "10.0.0.1:5555")
    assert not authz.allows(alice, Op.READ, T, "t")
    current = {uuid.uuid4(): acl(T, "t", Op.READ, host="10.0.0.1")}
    assert authz.allows(alice, Op.READ, T, "t") and authz.allowed(alice, Op.DESCRIBE, T, ["t", "u"]) == {"t"}
    assert Authorizer().allows(alice, Op.ALTER, C, "kafka-cluster")  # off: everything
