"""The broker's outgoing connections (broker/wire.py) against a real broker."""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

import pytest
from helpers.broker import BrokerProcess
from structlog.testing import capture_logs

from broker.wire import BrokerConnection, Channel, WireError
from protocol.messages.api_versions import ApiVersionsRequest


async def test_concurrent_callers_share_one_connect(broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two connections to one peer for one purpose would let its requests overtake each other."""
    host, port = broker.inter_broker_bootstrap.split(":")
    connects: list[tuple[str, int]] = []
    real = BrokerConnection.connect.__func__  # type: ignore[attr-defined]

    async def counted(cls: type[BrokerConnection], h: str, p: int, **kw: Any) -> BrokerConnection:
        connects.append((h, p))
        return await real(cls, h, p, **kw)

    monkeypatch.setattr(BrokerConnection, "connect", classmethod(counted))
    channel = Channel(lambda node: (host, int(port)), "test")
    try:
        conns = await asyncio.gather(*(channel.connection(7) for _ in range(5)))
        assert len({id(c) for c in conns}) == 1
        assert connects == [(host, int(port))]
        conns[0].close()
        again = await channel.connection(7)  # a closed connection is replaced
        assert again is not conns[0] and not again.closed and len(connects) == 2
    finally:
        channel.close()


async def test_a_malformed_answer_fails_the_connection_with_a_log_line() -> None:
    """No real broker sends a malformed answer, so the peer here is a socket that does: the
    requests waiting on the connection must fail at once, not wait for their timeout behind a
    read loop that died silently."""

    async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        frame = await reader.readexactly(size)
        corr = frame[4:8]
        body = b"\x00\x00" + b"\x00\x00\x00\x05"  # ApiVersions v0: no error, 5 api keys... that never come
        writer.write(struct.pack(">i", 4 + len(body)) + corr + body)
        await writer.drain()
        await reader.read()  # hold the socket until the other side closes it

    server = await asyncio.start_server(peer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        conn = BrokerConnection(reader, writer, "test")
        with capture_logs() as logs:
            start = time.monotonic()
            results = await asyncio.gather(conn.request(ApiVersionsRequest(), version=0, timeout=3.0),
                                           conn.request(ApiVersionsRequest(), version=0, timeout=3.0),
                                           return_exceptions=True)
            took = time.monotonic() - start
        assert all(isinstance(r, WireError) and "malformed" in str(r) for r in results), results
        assert took < 1.5, f"the requests waited {took:.1f}s for their timeout"
        assert conn.closed
        assert any("malformed" in e["event"] for e in logs), logs
    finally:
        server.close()
