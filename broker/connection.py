"""The Kafka connection protocol: frames in, handlers run, responses out in request order.

Each connection is an asyncio.Protocol (cheaper than streams on the hot path) given its listener's
context and API table (broker/apis) and the broker's connection registry, and nothing else of the
broker. Its requests are handled concurrently — a long-polling fetch must not hold up the produce
behind it — but answered strictly in request order, as Kafka requires. An API whose module declares
ORDERED (the transaction coordinator's: they may park, and what follows them on the connection may
depend on their outcome, as a produce after AddPartitionsToTxn) starts only once every earlier
request of its connection has finished, and every later one only once it has: Kafka processes a
connection's requests one at a time.

The front door (broker/admission.py decides, this applies): a connection over a connection cap is
closed as soon as it is made; the bytes of the requests a connection holds (read, not yet
answered) come from a memory pool, and a connection whose next request does not fit stops being
read until answers give memory back; so does one whose peer does not read its answers (the
transport's write buffer is full), and one with too many requests in flight; one silent for
connections.max.idle.ms is closed.
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

from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.errors import ErrorCode
from protocol.framing import FrameError, FrameReader, response_chunks
from protocol.headers import RequestHeader, read_request_header
from protocol.messages.api_versions import ApiVersionsResponse
from protocol.messages.registry import REQUESTS
from protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from protocol.primitives import Buffer, DecodeError, Reader
from protocol.supported import API_NAMES, api_versions_table

from .admission import IDLE, Admission, Limits
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
    request limits, the front door's counts (`admission`), the connections waiting for request
    memory, and what a closed connection releases (`on_close(conn_id)`: its fetch sessions)."""

    def __init__(self, metrics: BrokerMetrics, max_request_bytes: int, max_pipelined: int,
                 on_close: Callable[[int], None], *, admission: Admission | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__()
        self.metrics = metrics
        self.max_request_bytes = max_request_bytes
        self.max_pipelined = max_pipelined
        self.on_close = on_close
        self.admission = admission or Admission(Limits())
        self.clock = clock
        self.waiting: dict[Connection, None] = {}  # paused until the pool can hold their next request

    def give(self, size: int, protected: bool) -> None:
        """Request memory comes back: the waiting connections that now fit read again, oldest first."""
        self.admission.give(size, protected)
        for conn in list(self.waiting):
            if conn.closed or conn.reserve_pending():
                del self.waiting[conn]

    def close_idle(self) -> None:
        now = self.clock.monotonic_ms()
        idle = self.admission.idle
        for conn in list(self):
            if not conn.closed and idle(conn.last_active_ms, now, bool(conn.slots or conn.tasks)):
                conn.abort(IDLE, idle_ms=now - conn.last_active_ms)

    async def close_idle_forever(self) -> None:
        """The idle sweep; runs until cancelled (broker/server.py starts and stops it)."""
        while True:
            await asyncio.sleep(self.admission.sweep_interval_s())
            self.close_idle()


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

    frame: list[Buffer] | None = None  # the answer's frame in the pieces of a vectored write
    done: bool = False


class Connection(asyncio.Protocol):
    def __init__(self, ctx: object, apis: ApiTable, registry: ConnectionRegistry, endpoint: tuple[str, int],
                 inter_broker: bool = False, protected: bool | None = None,
                 security: ListenerSecurity | None = None) -> None:
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
        # brokers' listeners (inter-broker, controller): counted against no cap (broker/admission.py)
        self.protected = inter_broker if protected is None else protected
        self.ip: str | None = None  # counted by the admission under this address until closed
        self.held = 0  # request bytes read and not yet answered (the reservation below apart)
        self.reserved = 0  # taken from the pool for the incomplete frame being read
        self.pauses: set[str] = set()  # why reading is paused: "pipelined", "memory", "write"
        self.last_active_ms = registry.clock.monotonic_ms()
        # in the order they started (a dict: cancelled in that order, not in memory-address order)
        self.tasks: dict[asyncio.Task[Any], None] = {}
        self.barrier: asyncio.Task[Any] | None = None  # the last ordered request still running

    # ---- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.info.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.metrics.connections_accepted += 1
        ip = str(peer[0]) if peer else "?"
        refused = self.registry.admission.connect(ip, self.protected)
        if refused is not None:
            self.abort(refused)
            return
        self.ip = ip
        if self.security is not None:
            self.auth = AuthSession.start(self.security, principal_of(transport.get_extra_info("ssl_object")))
            self._authenticated()
        self.registry.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        registry = self.registry
        registry.discard(self)
        registry.waiting.pop(self, None)
        registry.on_close(self.info.conn_id)
        if self.ip is not None:
            registry.admission.disconnect(self.ip, self.protected)
            self.ip = None
        if self.reserved:
            reserved, self.reserved = self.reserved, 0
            registry.give(reserved, self.protected)
        for t in self.tasks:
            t.cancel()  # each gives back what its request held (_finished)

    def pause_writing(self) -> None:
        """The peer does not read its answers: stop reading its requests, or the answers to them
        would pile up in the transport's buffer."""
        self._pause("write")

    def resume_writing(self) -> None:
        self._resume("write")

    def data_received(self, data: bytes) -> None:
        self.metrics.bytes_received += len(data)
        if self.closed:
            return
        self.last_active_ms = self.registry.clock.monotonic_ms()
        carried = self.reserved  # taken for the first frame this completes, if it does
        bad: FrameError | None = None
        try:
            frames = self.frames.feed(data)
        except FrameError as e:
            frames, bad = e.complete, e
        for frame in frames:
            if self.closed:
                return
            if carried:
                self.reserved = carried = 0
            else:
                self.registry.admission.take(len(frame), self.protected)
            self.held += len(frame)
            if not self._dispatch(frame):
                self._answered(len(frame))  # refused or answered at once
        if bad is not None:
            self.abort("invalid frame size", size=bad.size, limit=self.frames.max_size)
            return
        if self.closed:
            return
        if len(self.slots) >= self.registry.max_pipelined:
            self._pause("pipelined")
        if not self.reserve_pending():
            self._pause("memory")
            self.registry.waiting[self] = None

    # ---- the front door --------------------------------------------------------------------
    def reserve_pending(self) -> bool:
        """Take from the pool what the frame being read will hold, once its size is known; False
        (and nothing taken) when it does not fit yet. Reading resumes once it does."""
        size = self.frames.pending_size
        if size is not None and not self.reserved:
            admission = self.registry.admission
            if not admission.may_hold(self.held, size, self.protected):
                return False
            admission.take(size, self.protected)
            self.reserved = size
        self._resume("memory")
        return True

    def _answered(self, size: int) -> None:
        """A request's bytes are no longer held (answered, dropped, or its connection gone)."""
        self.held -= size
        self.registry.give(size, self.protected)

    def _pause(self, reason: str) -> None:
        if reason in self.pauses:
            return
        if not self.pauses and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self.pauses.add(reason)

    def _resume(self, reason: str) -> None:
        if reason not in self.pauses:
            return
        self.pauses.discard(reason)
        if not self.pauses and self.transport is not None and not self.closed:
            self.transport.resume_reading()

    # ---- requests --------------------------------------------------------------------------
    def abort(self, reason: str, **kw: Any) -> None:
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
            frame = response_chunks(header, reply.response)
        else:
            frame = [struct.pack(">i", len(reply.raw)) + reply.raw] if reply.raw is not None else []
        slot = _Slot()
        self.slots.append(slot)
        auth = self.auth
        assert auth is not None
        self.frames.min_size = 0 if auth.raw_tokens else 8  # a bare token may be shorter than a header
        self._authenticated()
        if reply.close:
            self.failing = True
            self._pause("failed login")  # for good: the connection closes after the answer
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

    def _dispatch(self, frame: bytes) -> bool:
        """Start the request's handler; False when none started (the frame's bytes are free)."""
        if self.failing:
            return False
        auth = self.auth
        if auth is not None and auth.raw_tokens:
            self._sasl(None, auth.token(frame, None))
            return False
        r = Reader(frame)
        api_key = int.from_bytes(frame[0:2], "big", signed=True)
        req_cls = REQUESTS.get(api_key)
        try:
            header = read_request_header(r, req_cls.FLEXIBLE if req_cls else None)
        except (DecodeError, UnicodeDecodeError) as e:  # a client id that is not UTF-8 too
            self.abort("malformed request header", error=str(e))
            return False
        self.info.client_id = header.client_id
        supported = self.apis.supported.get(api_key)
        if supported is None or req_cls is None:
            self.abort("unknown API key", api_key=api_key, api_version=header.api_version)
            return False
        lo, hi = supported
        if not lo <= header.api_version <= hi:
            if api_key == 18:
                # Kafka's fallback: error 35 and our ranges in a v0 body, so the client can retry.
                resp = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,
                                           api_keys=api_versions_table(self.apis.supported))
                hdr = RequestHeader(18, 0, header.correlation_id, header.client_id)
                self.slots.append(_Slot(response_chunks(hdr, resp), True))
                self._flush()
                log.info("unsupported ApiVersions version, answered with v0 ranges", conn=self.info.conn_id,
                         version=header.api_version, client_id=header.client_id)
                return False
            self.abort("unsupported API version", api=API_NAMES.get(api_key, api_key),
                       api_version=header.api_version, supported=f"{lo}-{hi}")
            return False
        if auth is not None and not auth.allows(api_key):
            self.abort("request before authentication", api=API_NAMES.get(api_key, api_key))
            return False
        try:
            req = req_cls.read(r, header.api_version)
        except (DecodeError, UnicodeDecodeError, ValueError) as e:
            self.abort("malformed request body", api=API_NAMES.get(api_key, api_key),
                       api_version=header.api_version, error=str(e))
            return False
        if auth is not None and not auth.authenticated:
            if api_key == SASL_HANDSHAKE:
                assert isinstance(req, SaslHandshakeRequest)
                self._sasl(header, auth.handshake(req.mechanism, header.api_version))
                return False
            if api_key == SASL_AUTHENTICATE:
                assert isinstance(req, SaslAuthenticateRequest)
                self._sasl(header, auth.token(bytes(req.auth_bytes), header.api_version))
                return False
        if auth is not None and auth.refuses(api_key):
            refused = refusal(api_key, header.api_version)
            if refused is None:
                self.abort("a request only brokers may make", api=API_NAMES.get(api_key, api_key),
                           principal=auth.principal)
                return False
            log.warning("refused: only brokers may ask this here", api=API_NAMES.get(api_key, api_key),
                        principal=auth.principal, peer=self.info.peer, listener=self.info.listener)
            self.slots.append(_Slot(response_chunks(header, refused), True))
            self._flush()
            return False
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
        self.tasks[task] = None
        started = time.perf_counter()
        size = len(frame)
        task.add_done_callback(lambda t: self._finished(t, slot, header, started, size))
        return True

    def _finished(self, task: asyncio.Task[Any], slot: _Slot, header: RequestHeader, started: float,
                  size: int) -> None:
        self.tasks.pop(task, None)
        self._answered(size)
        m = self.metrics
        m.requests[header.api_key] += 1
        m.request_seconds[header.api_key] += time.perf_counter() - started
        if task.cancelled() or self.closed:
            return
        exc = task.exception()
        if exc is not None:
            log.error("handler failed", api=API_NAMES.get(header.api_key), api_version=header.api_version,
                      conn=self.info.conn_id, exc_info=exc)
            self.abort("internal error in handler")
            return
        resp = task.result()
        if resp is not None:
            try:
                slot.frame = response_chunks(header, resp)
            except Exception as e:  # a bug of ours; the client must not hang on it
                log.error("response encoding failed", api=API_NAMES.get(header.api_key),
                          api_version=header.api_version, exc_info=e)
                self.abort("internal error encoding response")
                return
        slot.done = True
        self._flush()

    def _flush(self) -> None:
        slots = self.slots
        transport = self.transport
        while slots and slots[0].done:
            frame = slots.popleft().frame
            if frame is not None and transport is not None and not self.closed:
                if len(frame) == 1:
                    transport.write(frame[0])
                    self.metrics.bytes_sent += len(frame[0])
                else:
                    transport.writelines(frame)  # a fetch's batches go out from the buffers their read made
                    self.metrics.bytes_sent += sum(map(len, frame))
                self.last_active_ms = self.registry.clock.monotonic_ms()
        if len(slots) < self.registry.max_pipelined // 2:
            self._resume("pipelined")
