"""`ketch user scram set|delete|list`: users' SCRAM credentials (kafka-configs --alter
--add-config 'SCRAM-SHA-512=[password=...]' --entity-type users, and --describe). The password is
salted by the client (client/admin.py); the brokers keep only the keys derived from it."""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from protocol.scram import BY_NAME

from ..admin import Admin
from .support import CommandError, print_rows, subcommands


def _password(args: argparse.Namespace) -> str:
    if args.password is not None:
        return str(args.password)
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\n")
    return getpass.getpass(f"password for {args.user}: ")


def _mechanisms(args: argparse.Namespace) -> list[str]:
    return list(dict.fromkeys(args.mechanism or ["SCRAM-SHA-512"]))


async def _set(admin: Admin, args: argparse.Namespace) -> None:
    password = _password(args)
    if not password:
        raise CommandError("the password must not be empty")
    results = await admin.alter_user_scram_credentials(
        upsert={(args.user, m): password for m in _mechanisms(args)}, iterations=args.iterations)
    for user, err in results.items():
        if err is not None:
            raise CommandError(f"setting {user!r}: {err}")
    print(f"set {', '.join(_mechanisms(args))} for {args.user}")


async def _delete(admin: Admin, args: argparse.Namespace) -> None:
    results = await admin.alter_user_scram_credentials(delete=[(args.user, m) for m in _mechanisms(args)])
    for user, err in results.items():
        if err is not None:
            raise CommandError(f"deleting {user!r}: {err}")
    print(f"deleted {', '.join(_mechanisms(args))} of {args.user}")


async def _list(admin: Admin, args: argparse.Namespace) -> None:
    users = await admin.describe_user_scram_credentials(args.users or None)
    print_rows([{"user": u, "mechanism": m, "iterations": i}
                for u, mechs in sorted(users.items()) for m, i in sorted(mechs.items())], args.json)


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    user = sub.add_parser("user", help="users' SCRAM credentials").add_subparsers(dest="kind", required=True)
    scram = user.add_parser("scram", help="SCRAM-SHA-256/512 credentials").add_subparsers(dest="action", required=True)
    add = subcommands(scram, common)
    mechanisms: dict[str, Any] = {"choices": list(BY_NAME), "action": "append",
                  "help": "SCRAM-SHA-256 or SCRAM-SHA-512 (may be given twice; default SCRAM-SHA-512)"}
    s = add("set", _set, help="create or change a user's credential")
    s.add_argument("user")
    s.add_argument("--mechanism", **mechanisms)
    s.add_argument("--password", help="the password (visible in the process list: prefer the prompt or --password-stdin)")
    s.add_argument("--password-stdin", action="store_true", help="read the password from the first line of stdin")
    s.add_argument("--iterations", type=int, default=4096, help="PBKDF2 rounds, 4096 to 16384 (default 4096)")
    d = add("delete", _delete, help="delete a user's credential")
    d.add_argument("user")
    d.add_argument("--mechanism", **mechanisms)
    ls = add("list", _list, help="users with SCRAM credentials, their mechanisms and iterations")
    ls.add_argument("users", nargs="*")
