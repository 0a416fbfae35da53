"""The Kafka connection protocol: frames in, handlers run, responses out in request order.

Each connection is an asyncio.Protocol (cheaper than streams on the hot path) given its listener's
context and API table (broker/apis) and the broker's connection registry, and nothing else of the
broker. Its requests are handled concurrently — a long-polling fetch must not hold up the produce
behind it — but answered strictly in request order, as Kafka requires. An API whose module declares
ORDERED (the transaction coordinator's: they may park, and what follows them on the connection may
depend on their outcome, as a produce after AddPartitionsToTxn) starts only once every earlier
request of its connection has finished, and every later one only once it has: Kafka processes a
connection's requests one at a time.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from protocol.errors import ErrorCode
from protocol.framing import FrameError, FrameReader, encode_response
from protocol.headers import RequestHeader, read_request_header
from protocol.messages.api_versions import ApiVersionsResponse
from protocol.messages.registry import REQUESTS
from protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from protocol.primitives import DecodeError, Reader
from protocol.supported import API_NAMES, api_versions_table

from .context import ClientInfo
from .security.refusal import refusal
from .security.session import SASL_AUTHENTICATE, SASL_HANDSHAKE, AuthSession, ListenerSecurity, Reply
from .security.tls import principal_of

if TYPE_CHECKING:
    from .apis import ApiTable
    from .metrics import BrokerMetrics

log = structlog.get_logger()

_conn_ids = itertools.count(1)


class ConnectionRegistry(set["Connection"]):
    """The open connections of every listener, and what they share: the broker's metrics, the
    request limits, and what a closed connection releases (`on_close(conn_id)`: its fetch sessions)."""

    def __init__(self, metrics: BrokerMetrics, max_request_bytes: int, max_pipelined: int,
                 on_close: Callable[[int], None]) -> None:
        super().__init__()
        self.metrics = metrics
        self.max_request_bytes = max_request_bytes
        self.max_pipelined = max_pipelined
        self.on_close = on_close


async def _after(earlier: set[asyncio.Task[Any]], handler: Coroutine[Any, Any, Any]) -> Any:
    """Run `handler` once every task of `earlier` is done (whatever their outcome)."""
    try:
        await asyncio.wait(earlier)
    except BaseException:
        handler.close()  # never started: no "coroutine was never awaited" on a closed connection
        raise
    return await handler


@dataclass(slots=True)
class _Slot:
    """A place in the per-connection response queue, filled when its handler finishes."""

    frame: bytes | None = None
    done: bool = False


class Connection(asyncio.Protocol):
    def __init__(self, ctx: object, apis: ApiTable, registry: ConnectionRegistry, endpoint: tuple[str, int],
                 inter_broker: bool = False, security: ListenerSecurity | None = None) -> None:
        self.ctx = ctx  # a BrokerContext, or a ControllerContext on the controller listener
        self.apis = apis
        self.registry = registry
        self.metrics = registry.metrics
        self.transport: asyncio.Transport | None = None
        # a frame too short for a request header is garbage; one over the limit is refused unread
        self.frames = FrameReader(min_size=8, max_size=registry.max_request_bytes)
        self.slots: deque[_Slot] = deque()
        self.info = ClientInfo(next(_conn_ids), "?", endpoint, inter_broker)
        # the listener's authentication (broker/security/session.py); None: a bare PLAINTEXT listener
        self.security = security
        self.auth: AuthSession | None = None
        self.info.listener = security.spec.name if security is not None else ""
        self._inter_broker_listener = inter_broker
        self.closed = False
        self.failing = False  # a failed login: its answer is on its way, nothing more is read
        self.reading_paused = False
        self.tasks: set[asyncio.Task[Any]] = set()
        self.barrier: asyncio.Task[Any] | None = None  # the last ordered request still running

    # ---- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.info.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        if self.security is not None:
            self.auth = AuthSession.start(self.security, principal_of(transport.get_extra_info("ssl_object")))
            self._authenticated()
        self.registry.add(self)
        self.metrics.connections_accepted += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.registry.discard(self)
        self.registry.on_close(self.info.conn_id)
        for t in self.tasks:
            t.cancel()

    def data_received(self, data: bytes) -> None:
        self.metrics.bytes_received += len(data)
        if self.closed:
            return
        bad: FrameError | None = None
        try:
            frames = self.frames.feed(data)
        except FrameError as e:
            frames, bad = e.complete, e
        for frame in frames:
            if self.closed:
                return
            self._dispatch(frame)
        if bad is not None:
            self._abort("invalid frame size", size=bad.size, limit=self.frames.max_size)
            return
        if len(self.slots) >= self.registry.max_pipelined and not self.reading_paused and self.transport:
            self.reading_paused = True
            self.transport.pause_reading()

    # ---- requests --------------------------------------------------------------------------
    def _abort(self, reason: str, **kw: Any) -> None:
        """Close a connection that sent something we cannot answer; logged once per connection."""
        if self.closed:
            return
        log.warning("closing connection: " + reason, conn=self.info.conn_id, peer=self.info.peer,
                    client_id=self.info.client_id, **kw)
        self.metrics.connections_aborted[reason] += 1
        self.closed = True
        if self.transport:
            self.transport.close()

    def _authenticated(self) -> None:
        """The session says who the peer is (or not yet): what the handlers see follows it."""
        auth = self.auth
        assert auth is not None
        self.info.principal = auth.principal
        self.info.inter_broker = self._inter_broker_listener and auth.trusted_broker
        if auth.authenticated:
            self.frames.min_size = 8

    def _sasl(self, header: RequestHeader | None, reply: Reply) -> None:
        """Send what the session answered, in its place among the connection's answers; close after
        it when the session says so (a failed login only after its delay, reading nothing more)."""
        if reply.response is not None:
            assert header is not None
            frame = encode_response(header, reply.response)
        else:
            frame = struct.pack(">i", len(reply.raw)) + reply.raw if reply.raw is not None else b""
        slot = _Slot()
        self.slots.append(slot)
        auth = self.auth
        assert auth is not None
        self.frames.min_size = 0 if auth.raw_tokens else 8  # a bare token may be shorter than a header
        self._authenticated()
        if reply.close:
            self.failing = True
            if self.transport is not None:
                self.transport.pause_reading()
            log.info("authentication failed: closing the connection", conn=self.info.conn_id, peer=self.info.peer,
                     reason=reply.reason, listener=self.info.listener)
            self.metrics.connections_aborted["authentication failed"] += 1

        def send() -> None:
            slot.frame, slot.done = frame or None, True
            self._flush()
            if reply.close and self.transport is not None:
                self.closed = True
                self.transport.close()

        if reply.delay_s > 0:
            asyncio.get_running_loop().call_later(reply.delay_s, send)
        else:
            send()

    def _dispatch(self, frame: bytes) -> None:
        if self.failing:
            return
        auth = self.auth
        if auth is not None and auth.raw_tokens:
            self._sasl(None, auth.token(frame, None))
            return
        r = Reader(frame)
        api_key = int.from_bytes(frame[0:2], "big", signed=True)
        req_cls = REQUESTS.get(api_key)
        try:
            header = read_request_header(r, req_cls.FLEXIBLE if req_cls else None)
        except DecodeError as e:
            self._abort("malformed request header", error=str(e))
            return
        self.info.client_id = header.client_id
        supported = self.apis.supported.get(api_key)
        if supported is None or req_cls is None:
            self._abort("unknown API key", api_key=api_key, api_version=header.api_version)
            return
        lo, hi = supported
        if not lo <= header.api_version <= hi:
            if api_key == 18:
                # Kafka's fallback: error 35 and our ranges in a v0 body, so the client can retry.
                resp = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,
                                           api_keys=api_versions_table(self.apis.supported))
                hdr = RequestHeader(18, 0, header.correlation_id, header.client_id)
                self.slots.append(_Slot(encode_response(hdr, resp), True))
                self._flush()
                log.info("unsupported ApiVersions version, answered with v0 ranges", conn=self.info.conn_id,
                         version=header.api_version, client_id=header.client_id)
                return
            self._abort("unsupported API version", api=API_NAMES.get(api_key, api_key),
                        api_version=header.api_version, supported=f"{lo}-{hi}")
            return
        if auth is not None and not auth.allows(api_key):
            self._abort("request before authentication", api=API_NAMES.get(api_key, api_key))
            return
        try:
            req = req_cls.read(r, header.api_version)
        except (DecodeError, UnicodeDecodeError, ValueError) as e:
            self._abort("malformed request body", api=API_NAMES.get(api_key, api_key),
                        api_version=header.api_version, error=str(e))
            return
        if auth is not None and not auth.authenticated:
            if api_key == SASL_HANDSHAKE:
                assert isinstance(req, SaslHandshakeRequest)
                self._sasl(header, auth.handshake(req.mechanism, header.api_version))
                return
            if api_key == SASL_AUTHENTICATE:
                assert isinstance(req, SaslAuthenticateRequest)
                self._sasl(header, auth.token(bytes(req.auth_bytes), header.api_version))
                return
        if auth is not None and auth.refuses(api_key):
            refused = refusal(api_key, header.api_version)
            if refused is None:
                self._abort("a request only brokers may make", api=API_NAMES.get(api_key, api_key),
                            principal=auth.principal)
                return
            log.warning("refused: only brokers may ask this here", api=API_NAMES.get(api_key, api_key),
                        principal=auth.principal, peer=self.info.peer, listener=self.info.listener)
            self.slots.append(_Slot(encode_response(header, refused), True))
            self._flush()
            return
        handler = self.apis.handlers[api_key]
        slot = _Slot()
        self.slots.append(slot)
        coro = handler(self.ctx, self.info, header, req)
        ordered = api_key in self.apis.ordered
        if self.barrier is not None and self.barrier.done():
            self.barrier = None
        earlier = set(self.tasks) if ordered else ({self.barrier} if self.barrier else set())
        if earlier:
            coro = _after(earlier, coro)
        task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(coro)
        if ordered:
            self.barrier = task
        self.tasks.add(task)
        started = time.perf_counter()
        task.add_done_callback(lambda t: self._finished(t, slot, header, started))

    def _finished(self, task: asyncio.Task[Any], slot: _Slot, header: RequestHeader, started: float) -> None:
        self.tasks.discard(task)
        m = self.metrics
        m.requests[header.api_key] += 1
        m.request_seconds[header.api_key] += time.perf_counter() - started
        if task.cancelled() or self.closed:
            return
        exc = task.exception()
        if exc is not None:
            log.error("handler failed", api=API_NAMES.get(header.api_key), api_version=header.api_version,
                      conn=self.info.conn_id, exc_info=exc)
            self._abort("internal error in handler")
            return
        resp = task.result()
        if resp is not None:
            try:
                slot.frame = encode_response(header, resp)
            except Exception as e:  # a bug of ours; the client must not hang on it
                log.error("response encoding failed", api=API_NAMES.get(header.api_key),
                          api_version=header.api_version, exc_info=e)
                self._abort("internal error encoding response")
                return
        slot.done = True
        self._flush()

    def _flush(self) -> None:
        slots = self.slots
        transport = self.transport
        while slots and slots[0].done:
            frame = slots.popleft().frame
            if frame is not None and transport is not None and not self.closed:
                transport.write(frame)
                self.metrics.bytes_sent += len(frame)
        if self.reading_paused and len(slots) < self.registry.max_pipelined // 2 and transport:
            self.reading_paused = False
            transport.resume_reading()
