"""`ketch acl list|add|remove`: ACL bindings, as kafka-acls manages them. `add` creates one binding
per operation given; `list` and `remove` select with the same options, every one left out matching
anything (`remove` with no option at all is refused: it would delete every ACL)."""

from __future__ import annotations

import argparse
from typing import Any

from protocol.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    parse_enum,
)

from ..admin import Admin
from .support import CommandError, print_rows, subcommands


def _resource(args: argparse.Namespace) -> tuple[int, str | None]:
    chosen = [(t, n) for t, n in ((ResourceType.TOPIC, args.topic), (ResourceType.GROUP, args.group),
                                  (ResourceType.TRANSACTIONAL_ID, args.transactional_id)) if n is not None]
    if args.cluster:
        chosen.append((ResourceType.CLUSTER, CLUSTER_NAME))
    if len(chosen) > 1:
        raise CommandError("name one resource: --topic, --group, --transactional-id or --cluster")
    return chosen[0] if chosen else (ResourceType.ANY, None)


def _enum(cls: Any, text: str) -> Any:
    try:
        return parse_enum(cls, text)
    except ValueError as e:
        raise CommandError(str(e)) from None


def _row(b: AclBinding) -> dict[str, Any]:
    return {"resource_type": ResourceType(b.resource_type).name, "pattern": PatternType(b.pattern_type).name,
            "name": b.resource_name, "principal": b.principal, "host": b.host,
            "permission": AclPermissionType(b.permission).name, "operation": AclOperation(b.operation).name}


def _filter(args: argparse.Namespace, operation: str | None) -> AclFilter:
    rtype, name = _resource(args)
    return AclFilter(rtype, name, _enum(PatternType, args.resource_pattern_type or "any"), args.principal, args.host,
                     _enum(AclOperation, operation or "any"),
                     _enum(AclPermissionType, args.permission or "any"))


async def _list(admin: Admin, args: argparse.Namespace) -> None:
    print_rows([_row(b) for b in await admin.describe_acls(_filter(args, args.operation))], args.json)


async def _add(admin: Admin, args: argparse.Namespace) -> None:
    rtype, name = _resource(args)
    if name is None:
        raise CommandError("name the resource: --topic, --group, --transactional-id or --cluster")
    pattern = _enum(PatternType, args.resource_pattern_type or "literal")
    permission = _enum(AclPermissionType, args.permission or "allow")
    bindings = [AclBinding(rtype, name, pattern, args.principal, args.host or "*", _enum(AclOperation, op), permission)
                for op in args.operation]
    for b, err in zip(bindings, await admin.create_acls(bindings), strict=True):
        if err is not None:
            raise CommandError(f"creating {b.describe()}: {err}")
    print_rows([_row(b) for b in bindings], args.json)


async def _remove(admin: Admin, args: argparse.Namespace) -> None:
    if not any((args.topic, args.group, args.transactional_id, args.cluster, args.principal, args.host,
                args.operation)):
        raise CommandError("say what to remove (a resource, --principal, --host or --operation); "
                           "nothing would remove every ACL")
    removed = await admin.delete_acls([_filter(args, args.operation)])
    print_rows([_row(b) for b in removed[0]], args.json)


def _selectors(p: argparse.ArgumentParser, *, adding: bool) -> None:
    p.add_argument("--topic")
    p.add_argument("--group")
    p.add_argument("--transactional-id", dest="transactional_id")
    p.add_argument("--cluster", action="store_true", help="the cluster resource (kafka-cluster)")
    p.add_argument("--resource-pattern-type", help="literal (default for add) or prefixed; "
                   "for list/remove also any (default) or match")
    p.add_argument("--principal", required=adding, help="e.g. User:alice (User:* is everyone)")
    p.add_argument("--host", help="the client's address, * for any (default for add)")
    p.add_argument("--permission", help="allow (default for add) or deny")


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    a = sub.add_parser("acl", help="list, add or remove ACLs (the authorizer must be on)")
    action = subcommands(a.add_subparsers(dest="action", required=True), common)
    lst = action("list", _list, help="the ACLs matching the options (all without any)")
    _selectors(lst, adding=False)
    lst.add_argument("--operation", help="read, write, describe, ... (default any)")
    add = action("add", _add, help="allow (or --permission deny) operations on a resource to a principal")
    _selectors(add, adding=True)
    add.add_argument("--operation", action="append", required=True,
                     help="read, write, create, delete, alter, describe, cluster-action, describe-configs, "
                          "alter-configs, idempotent-write, all (repeatable)")
    rm = action("remove", _remove, help="remove the ACLs matching the options")
    _selectors(rm, adding=False)
    rm.add_argument("--operation")
