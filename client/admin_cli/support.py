"""What every admin command shares: the --bootstrap and --json options, one Admin for the run of
a command, printing rows, and errors as one line with exit status 1."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from protocol.clock import SYSTEM_CLOCK

from ..admin import Admin
from ..errors import KafkaClientError
from ..security import Security, security_from_properties

DEFAULT_BOOTSTRAP = "localhost:9092"
UNREACHABLE_S = 5.0  # how long a command waits for anything to listen at --bootstrap


class CommandError(Exception):
    """Why a command failed, printed as `error: ...` with exit status 1."""


def fail_on(what: str, err: KafkaClientError | None) -> None:
    if err is not None:
        raise CommandError(f"{what}: {err}")


def bootstrap_arg(value: str) -> str:
    """argparse type of --bootstrap: HOST:PORT[,HOST:PORT...]; a bad one is a usage error (exit 2)."""
    for item in value.split(","):
        host, sep, port = item.strip().rpartition(":")
        problem = ("expected HOST:PORT" if not sep or not host else
                   "the port must be a number from 1 to 65535" if not port.isdigit() or not 0 < int(port) <= 65535
                   else None)
        if problem:
            raise argparse.ArgumentTypeError(f"Invalid value {item!r} for configuration bootstrap: {problem}")
    return value


def common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap", default=DEFAULT_BOOTSTRAP, type=bootstrap_arg,
                        help=f"HOST:PORT of any broker, or several comma-separated (default {DEFAULT_BOOTSTRAP})")
    common.add_argument("--json", action="store_true", help="print JSON")
    common.add_argument("--command-config", dest="command_config",
                        help="a file of client security settings, as Kafka's tools take: security.protocol, "
                             "sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, "
                             "ssl.certificate.location, ssl.key.location (docs/security.md)")
    common.add_argument("--timeout", type=float, default=30.0,
                        help="seconds a command keeps retrying a broker that answers with a retriable error "
                             "(default 30); a bootstrap address nothing listens on fails within "
                             f"{UNREACHABLE_S:g} s")
    return common


async def reachable(bootstrap: str, within: float) -> None:
    """Fail fast, in the user's terms, when nothing listens at any bootstrap address: retrying for
    the whole timeout (30 s) against a refused port only hides a typo in --bootstrap. A broker
    restarting there is back within `within`."""
    deadline = SYSTEM_CLOCK.monotonic() + within
    errors: dict[str, str] = {}
    while True:
        for item in bootstrap.split(","):
            host, _, port = item.strip().rpartition(":")
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 2.0)
            except ConnectionRefusedError:
                errors[item.strip()] = "connection refused"
                continue
            except TimeoutError:
                errors[item.strip()] = "connect timed out"
                continue
            except OSError as e:
                errors[item.strip()] = e.strerror or str(e)
                continue
            writer.close()
            return
        if SYSTEM_CLOCK.monotonic() >= deadline:
            raise CommandError("no broker reachable at " + ", ".join(f"{a} ({why})" for a, why in errors.items()))
        await asyncio.sleep(0.5)


def security_from_file(path: str) -> Security:
    """A `--command-config` properties file (KEY=VALUE lines, # comments) as the client's Security."""
    try:
        lines = open(path).read().splitlines()  # noqa: SIM115 - read at once
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror}") from None
    props: dict[str, str] = {}
    for line in (ln.strip() for ln in lines):
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise CommandError(f"{path}: expected KEY=VALUE, not {line!r}")
        props[key.strip()] = value.strip()
    try:
        return security_from_properties(props)
    except ValueError as e:
        raise CommandError(f"{path}: {e}") from None


def pairs(items: list[str]) -> dict[str, str]:
    """KEY=VALUE arguments; anything else is a usage error (exit 2)."""
    bad = [kv for kv in items if "=" not in kv]
    if bad:
        print(f"error: expected KEY=VALUE, got {', '.join(bad)}", file=sys.stderr)
        sys.exit(2)
    return dict(kv.split("=", 1) for kv in items)


Command = Callable[[Admin, argparse.Namespace], Awaitable[int | None]]


def command(fn: Command) -> Callable[[argparse.Namespace], int]:
    """The argparse `func` running `fn` with an Admin bootstrapped from --bootstrap."""
    def run(args: argparse.Namespace) -> int:
        async def with_admin() -> int | None:
            await reachable(args.bootstrap, min(UNREACHABLE_S, args.timeout))
            security = security_from_file(args.command_config) if getattr(args, "command_config", None) else None
            async with Admin(args.bootstrap, request_timeout=args.timeout, security=security) as admin:
                return await fn(admin, args)
        try:
            return asyncio.run(with_admin()) or 0
        except (CommandError, KafkaClientError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    return run


def subcommands(subparsers: Any, common: argparse.ArgumentParser) -> Callable[..., argparse.ArgumentParser]:
    """`add(name, fn, **kw)` adds a subcommand with the common options that runs `fn`."""
    def add(name: str, fn: Command, **kw: Any) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = subparsers.add_parser(name, parents=[common], **kw)
        p.set_defaults(func=command(fn))
        return p
    return add


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    print()


def print_rows(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json(rows)
        return
    if not rows:
        print("(none)")
        return
    cols = list(rows[0])
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in cols]
    print("  ".join(c.upper().ljust(w) for c, w in zip(cols, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths, strict=True)))
