"""The authorizer, sans-IO: ACL bindings + (principal, host, operation, resource) -> allow or deny.

Kafka's StandardAuthorizer rules, which clients and operators already know:
- `super_users` (Kafka's super.users) may do everything.
- The bindings that apply to a resource are those of its type whose pattern matches its name: a
  LITERAL pattern with the same name or the wildcard '*', a PREFIXED pattern the name starts with.
  Of these, a binding counts for a request when its principal is the requester's or 'User:*' and
  its host the requester's address or '*'.
- A DENY for the operation (or ALL) wins over any ALLOW. An ALLOW grants its operation, ALL grants
  every one, and some grant others too: READ, WRITE, DELETE and ALTER imply DESCRIBE;
  ALTER_CONFIGS implies DESCRIBE_CONFIGS. (A DENY implies nothing: DENY READ leaves DESCRIBE.)
- A resource that no binding applies to at all (whoever it names) is allowed to everyone only with
  `allow_everyone_if_no_acl_found`; it is false by default, so turning the authorizer on without
  ACLs shuts out everyone but the super users.
- Off (the default: `authorizer = false`), every check allows, as a Kafka broker without
  authorizer.class.name.

The bindings come from the broker's metadata image (AccessControlEntryRecord), so every broker
decides on what the controller committed, each as soon as its image has it. The index is rebuilt
when the image's bindings change, not per request.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from protocol.acl import WILDCARD, AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

ANONYMOUS = "User:ANONYMOUS"
ANY_USER = "User:*"
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALL = AclOperation.ALL

# requested operation -> the ALLOW operations that grant it (Kafka's implied operations)
_GRANTED_BY: dict[int, frozenset[int]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER, ALL}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, ALL}),
}


def granted_by(op: int) -> frozenset[int]:
    return _GRANTED_BY.get(op, frozenset({op, ALL}))


class Requester(Protocol):
    """Who asks: ClientInfo has both (the peer is "address:port")."""

    principal: str
    peer: str


def host_of(peer: str) -> str:
    return peer.rsplit(":", 1)[0]


@dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    enabled: bool = False
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


def parse_super_users(text: str) -> frozenset[str]:
    """Kafka's super.users: principals separated by ';' ("User:admin;User:broker")."""
    return frozenset(p.strip() for p in text.split(";") if p.strip())


class AclIndex:
    """The bindings by resource type: literal ones by name, prefixed ones in a list."""

    def __init__(self, bindings: Iterable[AclBinding]) -> None:
        self._literal: dict[tuple[int, str], list[AclBinding]] = {}
        self._prefixed: dict[int, list[AclBinding]] = {}
        self._by_type: dict[int, list[AclBinding]] = {}
        for b in bindings:
            self._by_type.setdefault(b.resource_type, []).append(b)
            if b.pattern_type == PatternType.LITERAL:
                self._literal.setdefault((b.resource_type, b.resource_name), []).append(b)
            elif b.pattern_type == PatternType.PREFIXED:
                self._prefixed.setdefault(b.resource_type, []).append(b)

    def applying_to(self, resource_type: int, name: str) -> list[AclBinding]:
        """Every binding whose resource pattern matches (whoever it names)."""
        out = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            out += self._literal.get((resource_type, WILDCARD), ())
        out += [b for b in self._prefixed.get(resource_type, ()) if name.startswith(b.resource_name)]
        return out

    def of_type(self, resource_type: int) -> list[AclBinding]:
        return self._by_type.get(resource_type, [])


def _for(b: AclBinding, principal: str, host: str) -> bool:
    return b.principal in (principal, ANY_USER) and b.host in (host, WILDCARD)


def decide(settings: AuthorizerSettings, index: AclIndex, principal: str, host: str, op: int,
           resource_type: int, name: str) -> bool:
    """Whether `principal` at `host` may do `op` on the resource (the rules in the module docstring)."""
    if not settings.enabled or principal in settings.super_users:
        return True
    bindings = index.applying_to(resource_type, name)
    if not bindings:
        return settings.allow_everyone_if_no_acl_found
    mine = [b for b in bindings if _for(b, principal, host)]
    if any(b.permission == DENY and b.operation in (op, ALL) for b in mine):
        return False
    grants = granted_by(op)
    return any(b.permission == ALLOW and b.operation in grants for b in mine)


def decide_any(settings: AuthorizerSettings, index: AclIndex, principal: str, host: str, op: int,
               resource_type: int) -> bool:
    """Whether `principal` may do `op` on at least one resource of the type (Kafka's
    authorizeByResourceType, KIP-679: an idempotent producer with WRITE on some topic needs no
    IDEMPOTENT_WRITE on the cluster): an ALLOW that no DENY of the principal covers — a DENY on
    the same literal name, on the wildcard, or a prefix of the ALLOW's name."""
    if not settings.enabled or principal in settings.super_users:
        return True
    all_of_type = index.of_type(resource_type)
    if not all_of_type:
        return settings.allow_everyone_if_no_acl_found
    mine = [b for b in all_of_type if _for(b, principal, host)]
    denies = [b for b in mine if b.permission == DENY and b.operation in (op, ALL)]
    if any(d.pattern_type == PatternType.LITERAL and d.resource_name == WILDCARD for d in denies):
        return False
    grants = granted_by(op)
    for a in mine:
        if a.permission != ALLOW or a.operation not in grants:
            continue
        covered = any(d.pattern_type == PatternType.PREFIXED and a.resource_name.startswith(d.resource_name)
                      or d.pattern_type == PatternType.LITERAL and a.pattern_type == PatternType.LITERAL
                      and d.resource_name == a.resource_name for d in denies)
        if not covered:
            return True
    return False


@dataclass
class Authorizer:
    """The broker's authorizer: its settings and where the committed bindings are (the metadata
    image); what handlers ask (`allows`)."""

    settings: AuthorizerSettings = field(default_factory=AuthorizerSettings)
    bindings: Callable[[], Mapping[uuid.UUID, AclBinding]] = dict
    _seen: Mapping[uuid.UUID, AclBinding] | None = None
    _index: AclIndex = field(default_factory=lambda: AclIndex(()))

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def index(self) -> AclIndex:
        current = self.bindings()
        if current is not self._seen:
            self._index, self._seen = AclIndex(current.values()), current
        return self._index

    def allows(self, who: Requester, op: AclOperation, resource_type: ResourceType, name: str) -> bool:
        if not self.settings.enabled:
            return True
        return decide(self.settings, self.index(), who.principal, host_of(who.peer), op, resource_type, name)

    def allows_any(self, who: Requester, op: AclOperation, resource_type: ResourceType) -> bool:
        if not self.settings.enabled:
            return True
        return decide_any(self.settings, self.index(), who.principal, host_of(who.peer), op, resource_type)

    def allowed(self, who: Requester, op: AclOperation, resource_type: ResourceType, names: Iterable[str]) -> set[str]:
        """The names among `names` that `who` may do `op` on."""
        return {n for n in names if self.allows(who, op, resource_type, n)}
