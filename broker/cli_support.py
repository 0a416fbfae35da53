"""What every admin command shares: connecting, error checks, printing rows, running a
coroutine to an exit status. Its own module so the command modules need not import each other."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest

from .config import ConfigError, parse_host_port
from .wire import BrokerConnection, WireError


class AdminError(Exception):
    pass


def split_hostport(hostport: str) -> tuple[str, int]:
    try:
        return parse_host_port("bootstrap", hostport)
    except ConfigError as e:
        raise AdminError(str(e)) from None


def bootstrap_arg(value: str) -> str:
    """argparse type of --bootstrap: a bad address is a usage error (one line, exit 2)."""
    try:
        parse_host_port("bootstrap", value)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return value


def check(code: int, what: str) -> None:
    if code:
        raise AdminError(f"{what}: {ErrorCode(code).name}")


async def connect(bootstrap: str) -> BrokerConnection:
    host, port = split_hostport(bootstrap)
    return await BrokerConnection.connect(host, port, client_id="ketch-admin")


async def coordinator(bootstrap: str, group: str, key_type: int = 0) -> BrokerConnection:
    conn = await connect(bootstrap)
    try:
        resp = await conn.request(FindCoordinatorRequest(key=group, key_type=key_type), version=1)
    finally:
        conn.close()
    check(resp.error_code, f"finding the coordinator of {group!r}")
    return await BrokerConnection.connect(resp.host, resp.port, client_id="ketch-admin")


def print_rows(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        json.dump(rows, sys.stdout, indent=2, default=str)
        print()
        return
    if not rows:
        print("(none)")
        return
    cols = list(rows[0])
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in cols]
    print("  ".join(c.upper().ljust(w) for c, w in zip(cols, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths, strict=True)))


def run_command(coro: Any) -> Any:
    try:
        return asyncio.run(coro)
    except (AdminError, WireError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
