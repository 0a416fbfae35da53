"""Name lookups for the connections brokers open to each other.

asyncio resolves names on the loop's default thread pool, a handful of threads. A broker whose
container has stopped leaves DNS, and where the upstream resolvers cannot be reached every lookup
of its name blocks a thread for the resolver's whole timeout. Every loop that keeps reconnecting to
it (quorum, replica fetcher, marker sender, heartbeats) then holds a thread of its own, and lookups
of the live brokers queue behind them — seen in containers as a quorum that could not elect a
leader. So one name has at most one lookup in flight, shared by everyone who asks; a caller that
gives up (its connect timeout) leaves the lookup to finish on its own, its outcome consumed, not
logged as an unretrieved exception.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import weakref

_inflight: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Task[list[str]]]] = \
    weakref.WeakKeyDictionary()


def _literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def resolve(host: str, port: int) -> list[str]:
    """The addresses of `host`, in the resolver's order (an IP literal is its own answer)."""
    if _literal(host):
        return [host]
    loop = asyncio.get_running_loop()
    pending = _inflight.setdefault(loop, {})
    task = pending.get(host)
    if task is None:
        task = pending[host] = loop.create_task(_lookup(loop, host, port))
        task.add_done_callback(lambda t: _settle(pending, host, t))
    return await asyncio.shield(task)


def _settle(pending: dict[str, asyncio.Task[list[str]]], host: str, task: asyncio.Task[list[str]]) -> None:
    if pending.get(host) is task:
        del pending[host]
    if not task.cancelled():
        task.exception()  # retrieved: whoever still waits gets it through the shield


async def _lookup(loop: asyncio.AbstractEventLoop, host: str, port: int) -> list[str]:
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise OSError(f"no address for {host}")
    return addresses


async def open_connection(host: str, port: int, tls: ssl.SSLContext | None = None
                          ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """asyncio.open_connection through `resolve`, trying each address in turn; over TLS with
    `tls`, the certificate checked against `host`, the name asked for."""
    error: OSError | None = None
    for address in await resolve(host, port):
        try:
            if tls is not None:
                return await asyncio.open_connection(address, port, ssl=tls, server_hostname=host)
            return await asyncio.open_connection(address, port)
        except OSError as e:
            error = e
    raise error or OSError(f"cannot connect to {host}:{port}")
