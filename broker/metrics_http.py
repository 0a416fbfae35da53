"""GET /metrics over plain HTTP/1.1, for Prometheus and curl: a few lines of asyncio, no web framework.

One request per connection, answered and closed. Anything that is not a well-formed GET within a
few seconds gets a 4xx (or is dropped), so a port scanner or a confused client cannot disturb the
broker; the page is rendered on the event loop from in-memory state and never touches the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import structlog

log = structlog.get_logger()

MAX_HEAD_BYTES = 8192
READ_TIMEOUT_S = 5.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _response(status: str, body: bytes, content_type: str = "text/plain; charset=utf-8",
              head_only: bool = False, extra: str = "") -> bytes:
    head = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            f"{extra}Connection: close\r\n\r\n").encode()
    return head if head_only else head + body


class MetricsEndpoint:
    def __init__(self, render: Callable[[], str], host: str, port: int) -> None:
        self._render = render
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def bind(self) -> None:
        """Take the port without serving yet (a taken port fails start-up before anything else)."""
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=MAX_HEAD_BYTES,
                                                  reuse_address=True, start_serving=False)

    async def start(self) -> None:
        if self._server is None:
            await self.bind()
        assert self._server is not None
        await self._server.start_serving()

    async def stop(self) -> None:
        if self._server:
            self._server.close()
            await self._server.wait_closed()

    def answer(self, head: bytes) -> bytes:
        """The response to one request head (everything up to the blank line)."""
        try:
            method, target, version = head.split(b"\r\n", 1)[0].decode("ascii").split(" ")
        except (UnicodeDecodeError, ValueError):
            return _response("400 Bad Request", b"malformed request line\n")
        if not version.startswith("HTTP/1."):
            return _response("505 HTTP Version Not Supported", b"HTTP/1.x only\n")
        if method not in ("GET", "HEAD"):
            return _response("405 Method Not Allowed", b"GET /metrics\n", extra="Allow: GET, HEAD\r\n")
        path = target.split("?", 1)[0]
        if path == "/metrics":
            return _response("200 OK", self._render().encode(), CONTENT_TYPE, head_only=method == "HEAD")
        if path == "/":
            return _response("200 OK", b"Ketch broker. Prometheus metrics: /metrics\n", head_only=method == "HEAD")
        return _response("404 Not Found", b"not found; metrics are at /metrics\n")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            except asyncio.LimitOverrunError:
                writer.write(_response("431 Request Header Fields Too Large", b"request head too large\n"))
            except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
                return
            else:
                try:
                    writer.write(self.answer(head))
                except Exception as e:  # a bug in rendering must not take the broker down
                    log.error("metrics request failed", exc_info=e)
                    writer.write(_response("500 Internal Server Error", b"see the broker log\n"))
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
