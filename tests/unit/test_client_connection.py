"""Connection-level behaviour against a scripted peer: ApiVersions fallback (KIP-511) for an older
broker, version capping, pipelined answers matched by correlation id, request timeouts."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable

import pytest

from client.connection import Connection
from client.errors import ConnectionLostError, RequestTimedOutError
from protocol.headers import read_request_header, write_response_header
from protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.primitives import Reader, Writer

Handler = Callable[[int, int, int, asyncio.StreamWriter], Awaitable[None]]


def frame(corr: int, body: bytes, flexible_header: bool = False) -> bytes:
    w = Writer()
    write_response_header(w, corr, flexible_header)
    w.raw(body)
    payload = w.getvalue()
    return struct.pack(">i", len(payload)) + payload


async def serve(handler: Handler) -> tuple[asyncio.Server, int, list[tuple[int, int]]]:
    seen: list[tuple[int, int]] = []

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                body = await reader.readexactly(size)
                h = read_request_header(Reader(body), None)
                seen.append((h.api_key, h.api_version))
                await handler(h.api_key, h.api_version, h.correlation_id, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, port, seen


OLD_BROKER = [ApiVersion(api_key=18, min_version=0, max_version=2), ApiVersion(api_key=3, min_version=0, max_version=5)]


async def old_broker(api_key: int, version: int, corr: int, writer: asyncio.StreamWriter) -> None:
    if api_key == 18:
        if version > 2:  # what a pre-KIP-511 broker does: error 35 and a v0 body
            body = ApiVersionsResponse(error_code=35, api_keys=OLD_BROKER).encode(0)
        else:
            body = ApiVersionsResponse(error_code=0, api_keys=OLD_BROKER).encode(version)
        writer.write(frame(corr, body))
    elif api_key == 3:
        await asyncio.sleep(0.05 if corr % 2 else 0)
        writer.write(frame(corr, MetadataResponse(cluster_id=f"c{corr}").encode(version)))


async def test_falls_back_to_an_older_api_versions_and_caps_versions() -> None:
    server, port, seen = await serve(old_broker)
    async with server:
        conn = await Connection.open("127.0.0.1", port)
        try:
            assert seen[0] == (18, 4) and seen[1] == (18, 2)
            assert conn.version_for(MetadataRequest) == 5
            resp = await conn.request(MetadataRequest(topics=None))
            assert isinstance(resp, MetadataResponse)
            assert seen[-1] == (3, 5)
        finally:
            conn.close()


async def test_pipelined_requests_get_their_own_answers() -> None:
    server, port, _ = await serve(old_broker)
    async with server:
        conn = await Connection.open("127.0.0.1", port)
        try:
            resps = await asyncio.gather(*[conn.request(MetadataRequest(topics=None)) for _ in range(10)])
            # correlation ids 2..11 (1 was ApiVersions v4, then v2 is 2 ... ): each got its own cluster id
            ids = [r.cluster_id for r in resps]
            assert len(set(ids)) == 10
        finally:
            conn.close()


async def test_request_timeout_closes_the_connection() -> None:
    async def silent(api_key: int, version: int, corr: int, writer: asyncio.StreamWriter) -> None:
        if api_key == 18:
            await old_broker(api_key, version, corr, writer)

    server, port, _ = await serve(silent)
    async with server:
        conn = await Connection.open("127.0.0.1", port)
        with pytest.raises(RequestTimedOutError):
            await conn.request(MetadataRequest(topics=None), timeout=0.2)
        assert conn.closed
        with pytest.raises(ConnectionLostError):
            await conn.request(MetadataRequest(topics=None))


async def test_connect_refused_is_a_connection_error() -> None:
    server, port, _ = await serve(old_broker)
    server.close()
    await server.wait_closed()
    with pytest.raises(ConnectionLostError):
        await Connection.open("127.0.0.1", port, connect_timeout=2)


async def test_a_request_starts_no_task_of_its_own() -> None:
    """Sending a request is a write and a wait on its answer: no task of its own (Python 3.11's
    wait_for wraps a coroutine in one, a loop turn and a task for every request a client sends)."""
    server, port, _ = await serve(old_broker)
    async with server:
        conn = await Connection.open("127.0.0.1", port)
        loop = asyncio.get_running_loop()
        started: list[object] = []

        def count(loop: asyncio.AbstractEventLoop, coro: object, **kw: object) -> asyncio.Task[object]:
            started.append(coro)
            return asyncio.Task(coro, loop=loop, **kw)  # type: ignore[arg-type]

        loop.set_task_factory(count)  # type: ignore[arg-type]
        try:
            for _ in range(3):
                assert isinstance(await conn.request(MetadataRequest(topics=None)), MetadataResponse)
            assert started == []
        finally:
            loop.set_task_factory(None)
            conn.close()
