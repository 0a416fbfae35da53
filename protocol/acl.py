"""ACLs as Kafka's wire and metadata log carry them: the enum codes, a binding and a filter.

Shared by the broker (its authorizer, the controller that stores bindings, DescribeAcls and
DeleteAcls) and the bundled client's Admin, so both sides name the same codes the same way. Only
data and matching here: who is allowed what is decided in broker/security/authorizer.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from .messages.create_acls import AclCreation
from .messages.delete_acls import DeleteAclsFilter, DeleteAclsMatchingAcl
from .messages.describe_acls import AclDescription, DescribeAclsRequest, DescribeAclsResource

CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource
WILDCARD = "*"  # a LITERAL resource name, principal or host that matches every one

E = TypeVar("E", bound=IntEnum)


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type
    MATCH = 2  # filters only: the patterns that would apply to the named resource
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


def parse_enum(cls: type[E], text: str) -> E:
    """A code from its Kafka name, any case, '-' or '_' ('transactional-id', 'describe_configs')."""
    key = text.strip().upper().replace("-", "_")
    try:
        return cls[key]
    except KeyError:
        raise ValueError(f"{text!r} is not a {cls.__name__} ({', '.join(m.name.lower() for m in cls)})") from None


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: (resource pattern, principal, host, operation, permission), as Kafka's
    AccessControlEntryRecord stores it."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def problem(self) -> str | None:
        """Why Kafka would refuse to create this binding (INVALID_REQUEST), or None."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) or self.resource_type not in ResourceType._value2member_map_:
            return f"invalid resource type {self.resource_type}"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return f"invalid pattern type {self.pattern_type}: only LITERAL and PREFIXED ACLs can be created"
        if not self.resource_name:
            return "Invalid empty resource name"
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        if self.operation in (AclOperation.UNKNOWN, AclOperation.ANY) or self.operation not in AclOperation._value2member_map_:
            return f"invalid operation {self.operation}"
        if self.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            return f"invalid permission type {self.permission}"
        kind, sep, name = self.principal.partition(":")
        if not sep or not kind or not name:
            return f"Could not parse principal from `{self.principal}` (no colon is found between the type and the name)"
        if not self.host:
            return "Invalid empty host"
        return None

    def describe(self) -> str:
        """One readable line (the CLI's listing, log lines)."""
        return (f"{ResourceType(self.resource_type).name} {PatternType(self.pattern_type).name} "
                f"{self.resource_name!r}: {self.principal} from {self.host} "
                f"{AclPermissionType(self.permission).name} {AclOperation(self.operation).name}")


@dataclass(frozen=True, slots=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select by: ANY codes and None names match everything;
    pattern type MATCH selects the patterns that would apply to the named resource (the literal
    name, the wildcard, and every prefix of it)."""

    resource_type: int = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission: int = AclPermissionType.ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and b.resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is not None and not (
                    b.pattern_type == PatternType.LITERAL and b.resource_name in (self.resource_name, WILDCARD)
                    or b.pattern_type == PatternType.PREFIXED and self.resource_name.startswith(b.resource_name)):
                return False
        else:
            if self.pattern_type != PatternType.ANY and b.pattern_type != self.pattern_type:
                return False
            if self.resource_name is not None and b.resource_name != self.resource_name:
                return False
        if self.principal is not None and b.principal != self.principal:
            return False
        if self.host is not None and b.host != self.host:
            return False
        if self.operation != AclOperation.ANY and b.operation != self.operation:
            return False
        return self.permission == AclPermissionType.ANY or b.permission == self.permission

    def problem(self) -> str | None:
        """Why Kafka refuses this filter (INVALID_REQUEST): an UNKNOWN code can match nothing."""
        for name, value in (("resource type", self.resource_type), ("pattern type", self.pattern_type),
                            ("operation", self.operation), ("permission type", self.permission)):
            if value == 0:
                return f"the filter's {name} is UNKNOWN"
        return None


# ---- to and from the wire (the broker's handlers, the controller's forwarding, the client's Admin) ----
def creation_of(b: AclBinding) -> AclCreation:
    return AclCreation(resource_type=b.resource_type, resource_name=b.resource_name,
                       resource_pattern_type=b.pattern_type, principal=b.principal, host=b.host,
                       operation=b.operation, permission_type=b.permission)


def binding_of(c: AclCreation | DeleteAclsMatchingAcl) -> AclBinding:
    pattern = c.resource_pattern_type if isinstance(c, AclCreation) else c.pattern_type
    return AclBinding(c.resource_type, c.resource_name, pattern, c.principal, c.host, c.operation, c.permission_type)


def filter_of(r: DescribeAclsRequest | DeleteAclsFilter) -> AclFilter:
    return AclFilter(r.resource_type_filter, r.resource_name_filter, r.pattern_type_filter, r.principal_filter,
                     r.host_filter, r.operation, r.permission_type)


def delete_filter_of(f: AclFilter) -> DeleteAclsFilter:
    return DeleteAclsFilter(resource_type_filter=f.resource_type, resource_name_filter=f.resource_name,
                            pattern_type_filter=f.pattern_type, principal_filter=f.principal, host_filter=f.host,
                            operation=f.operation, permission_type=f.permission)


def describe_request_of(f: AclFilter) -> DescribeAclsRequest:
    return DescribeAclsRequest(resource_type_filter=f.resource_type, resource_name_filter=f.resource_name,
                               pattern_type_filter=f.pattern_type, principal_filter=f.principal, host_filter=f.host,
                               operation=f.operation, permission_type=f.permission)


def matching_acl_of(b: AclBinding) -> DeleteAclsMatchingAcl:
    return DeleteAclsMatchingAcl(error_code=0, resource_type=b.resource_type, resource_name=b.resource_name,
                                 pattern_type=b.pattern_type, principal=b.principal, host=b.host,
                                 operation=b.operation, permission_type=b.permission)


def described(resources: list[DescribeAclsResource]) -> list[AclBinding]:
    """The bindings a DescribeAcls answer lists."""
    return [AclBinding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                       a.permission_type) for r in resources for a in r.acls]


def describe_resources(bindings: list[AclBinding]) -> list[DescribeAclsResource]:
    """Bindings grouped by resource pattern, as DescribeAcls answers them."""
    by_pattern: dict[tuple[int, str, int], list[AclDescription]] = {}
    for b in sorted(bindings, key=lambda b: (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host,
                                             b.operation, b.permission)):
        by_pattern.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
            AclDescription(principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission))
    return [DescribeAclsResource(resource_type=t, resource_name=n, pattern_type=p, acls=acls)
            for (t, n, p), acls in by_pattern.items()]
