"""The simulated network: in-memory TCP between simulated processes, with seeded delays and faults.

What it keeps of TCP, because the broker's correctness leans on it: a connection delivers bytes in
order or not at all; a peer that dies resets its connections (the other side learns it one trip
later, or only when it next writes, if the reset is lost to a partition); a listener that is gone
refuses. What it adds: a per-link one-way delay chosen by the seed, links cut one way or both
(what is sent meanwhile waits, as TCP retransmits, and arrives when the link heals), and
connection attempts across a cut link that hang until the caller's own timeout.

Addresses are (host, port) with one host per simulated machine; a broker keeps its host across
restarts, as a container keeps its name.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .loop import PROC, Process

if TYPE_CHECKING:
    from .loop import SimLoop

CONNECT_TIMEOUT_S = 30.0  # a SYN across a cut link: the kernel gives up after about this long (roughly)
EPHEMERAL_PORT = 40000
ORDER_EPSILON = 1e-7  # seconds between two deliveries on one connection: keeps them in order


class _Socket:
    """What asyncio.Server.sockets offers the broker: getsockname()."""

    __slots__ = ("_name",)

    def __init__(self, name: tuple[str, int]) -> None:
        self._name = name

    def getsockname(self) -> tuple[str, int]:
        return self._name


class SimServer:
    """A listening socket of one process (asyncio.Server's surface that the broker uses)."""

    def __init__(self, net: SimNetwork, proc: Process | None, address: tuple[str, int],
                 factory: Callable[[], asyncio.BaseProtocol], serving: bool) -> None:
        self.net = net
        self.proc = proc
        self.address = address
        self.factory = factory
        self.serving = serving
        self.closed = False
        self.backlog: list[SimTransport] = []  # accepted by the kernel before start_serving
        self.sockets = [_Socket(address)]

    async def start_serving(self) -> None:
        self.serving = True
        backlog, self.backlog = self.backlog, []
        for t in backlog:
            self.net._accept(self, t)

    def is_serving(self) -> bool:
        return self.serving and not self.closed

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.net.listeners.pop(self.address, None)

    async def wait_closed(self) -> None:
        return None

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self.net.loop


class SimTransport(asyncio.Transport):
    """One end of a simulated TCP connection."""

    def __init__(self, net: SimNetwork, proc: Process | None, local: tuple[str, int],
                 remote: tuple[str, int]) -> None:
        super().__init__()
        self.net = net
        self.proc = proc
        self.local = local
        self.remote = remote
        self.peer: SimTransport | None = None
        self.protocol: asyncio.Protocol | None = None
        self.inbox: list[bytes | None] = []  # arrived while reading is paused / before accept; None = EOF
        self.reading = True
        self.closing = False  # this end closed (or aborted, or reset)
        self.gone = False  # connection_lost delivered
        self.held: list[bytes | None] = []  # sent while the link was cut: delivered when it heals
        self.last_arrival = 0.0  # FIFO: nothing overtakes what was sent before it

    # ---- asyncio.Transport -------------------------------------------------------------------------
    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": self.remote, "sockname": self.local}.get(name, default)

    def is_closing(self) -> bool:
        return self.closing

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol  # type: ignore[assignment]

    def get_protocol(self) -> asyncio.BaseProtocol:
        assert self.protocol is not None
        return self.protocol

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.closing or not data:
            return
        self.net._send(self, bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def write_eof(self) -> None:
        if not self.closing:
            self.net._send(self, None)

    def can_write_eof(self) -> bool:
        return True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return (0, 0)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        if self.reading:
            return
        self.reading = True
        inbox, self.inbox = self.inbox, []
        for item in inbox:
            self._arrive(item)

    def is_reading(self) -> bool:
        return self.reading

    def close(self) -> None:
        """Orderly close: what was written still arrives, then the peer sees EOF."""
        if self.closing:
            return
        self.net._send(self, None)
        self.closing = True
        self.net.loop.call_soon(self._lost, None)

    def abort(self) -> None:
        if self.closing:
            return
        self.closing = True
        self.net._reset_peer(self)
        self.net.loop.call_soon(self._lost, None)

    # ---- arrivals (run in this end's process) ---------------------------------------------------------
    def _arrive(self, item: bytes | None) -> None:
        if self.gone or self.closing and item is not None:
            return
        if not self.reading or self.protocol is None:
            self.inbox.append(item)
            return
        if item is None:
            keep_open = self.protocol.eof_received()
            if not keep_open:
                self.close()
            return
        self.protocol.data_received(item)

    def _lost(self, exc: Exception | None) -> None:
        if self.gone:
            return
        self.gone = True
        self.closing = True
        if self.protocol is not None:
            self.protocol.connection_lost(exc)


class SimNetwork:
    def __init__(self, loop: SimLoop) -> None:
        self.loop = loop
        self.rng = loop.rng
        loop.net = self
        self.listeners: dict[tuple[str, int], SimServer] = {}
        self.cut: set[tuple[str, str]] = set()  # (from host, to host) links that drop everything
        self.delay: dict[tuple[str, str], float] = {}  # one-way base delay per link
        self.transports: list[SimTransport] = []
        self._next_port = EPHEMERAL_PORT
        self.jitter = 0.0005

    # ---- topology ------------------------------------------------------------------------------------
    def link_delay(self, src: str, dst: str) -> float:
        d = self.delay.get((src, dst))
        if d is None:
            d = self.delay[(src, dst)] = 0.0001 + 0.0009 * self.rng.random()
        return d + self.jitter * self.rng.random()

    def is_cut(self, src: str, dst: str) -> bool:
        return (src, dst) in self.cut

    def cut_links(self, pairs: list[tuple[str, str]]) -> None:
        self.cut.update(pairs)

    def heal_held(self) -> None:
        """What waited behind a cut link that is whole again goes out (TCP's retransmission)."""
        for t in [t for t in self.transports if t.held and not self.is_cut(t.local[0], t.remote[0])]:
            held, t.held = t.held, []
            for item in held:
                self._send(t, item)

    # ---- asyncio's calls -----------------------------------------------------------------------------
    def getaddrinfo(self, host: str, port: int) -> list[tuple[Any, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (host, port))]

    async def listen(self, factory: Callable[[], asyncio.BaseProtocol], host: Any, port: int,
                     serving: bool) -> SimServer:
        proc = PROC.get()
        if not isinstance(host, str) or host in ("", "0.0.0.0", "::"):
            host = proc.host if proc is not None else "127.0.0.1"
        if port == 0:
            port = self._port()
        address = (host, port)
        existing = self.listeners.get(address)
        if existing is not None and (existing.proc is None or existing.proc.alive):
            raise OSError(errno.EADDRINUSE, f"address already in use: {host}:{port}")
        server = SimServer(self, proc, address, factory, serving)
        self.listeners[address] = server
        return server

    async def connect(self, factory: Callable[[], asyncio.BaseProtocol], host: str,
                      port: int) -> tuple[SimTransport, asyncio.BaseProtocol]:
        proc = PROC.get()
        src = proc.host if proc is not None else "sim"
        waited = 0.0
        while self.is_cut(src, host) or self.is_cut(host, src):
            if waited >= CONNECT_TIMEOUT_S:
                raise TimeoutError(errno.ETIMEDOUT, f"connect to {host}:{port} timed out")
            await asyncio.sleep(0.5)
            waited += 0.5
        await asyncio.sleep(self.link_delay(src, host) + self.link_delay(host, src))  # SYN, SYN-ACK
        server = self.listeners.get((host, port))
        if server is None or server.closed or (server.proc is not None and not server.proc.alive):
            raise ConnectionRefusedError(errno.ECONNREFUSED, f"connection refused: {host}:{port}")
        local = (src, self._port())
        mine = SimTransport(self, proc, local, (host, port))
        theirs = SimTransport(self, server.proc, (host, port), local)
        mine.peer, theirs.peer = theirs, mine
        self.transports += [mine, theirs]
        protocol = factory()
        mine.protocol = protocol  # type: ignore[assignment]
        protocol.connection_made(mine)
        if server.serving:
            self._accept(server, theirs)
        else:
            server.backlog.append(theirs)
        return mine, protocol

    def _accept(self, server: SimServer, t: SimTransport) -> None:
        def accept() -> None:
            if t.gone:
                return
            protocol = server.factory()
            t.protocol = protocol  # type: ignore[assignment]
            protocol.connection_made(t)
            inbox, t.inbox = t.inbox, []
            for item in inbox:
                t._arrive(item)
        self._in(t.proc, 0.0, accept)

    # ---- delivery ------------------------------------------------------------------------------------
    def _in(self, proc: Process | None, delay: float, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn` in `proc` after `delay` (parked while it is paused, dropped once it is dead)."""
        context = proc.context if proc is not None else None
        self.loop.call_at(self.loop.time() + delay, fn, *args, context=context)

    def _send(self, t: SimTransport, item: bytes | None) -> None:
        peer = t.peer
        if peer is None:
            return
        src, dst = t.local[0], t.remote[0]
        if t.held or self.is_cut(src, dst):
            t.held.append(item)
            return
        if peer.proc is not None and not peer.proc.alive:
            # the peer's host answers a segment for a connection it no longer has with a reset
            self._in(t.proc, self.link_delay(src, dst) + self.link_delay(dst, src), t._lost,
                     ConnectionResetError(errno.ECONNRESET, "connection reset by peer"))
            return
        now = self.loop.time()
        # strictly later than the previous segment: timers due at the same instant are not run in
        # the order they were set (the loop's heap is not stable), and TCP never reorders
        arrival = max(now + self.link_delay(src, dst), t.last_arrival + ORDER_EPSILON)
        t.last_arrival = arrival
        self._in(peer.proc, arrival - now, peer._arrive, item)

    def _reset_peer(self, t: SimTransport) -> None:
        peer = t.peer
        if peer is None or peer.gone:
            return
        src, dst = t.local[0], t.remote[0]
        if self.is_cut(src, dst):
            return  # the reset is lost: the peer finds out when it next writes
        now = self.loop.time()
        arrival = max(now + self.link_delay(src, dst), t.last_arrival + ORDER_EPSILON)
        self._in(peer.proc, arrival - now, peer._lost,
                 ConnectionResetError(errno.ECONNRESET, "connection reset by peer"))

    def process_died(self, proc: Process) -> None:
        """SIGKILL: the kernel closes its sockets — listeners vanish, peers get resets."""
        for address, server in list(self.listeners.items()):
            if server.proc is proc:
                del self.listeners[address]
        keep = []
        for t in self.transports:
            if t.proc is proc:
                t.closing = t.gone = True
                self._reset_peer(t)
            elif not t.gone:
                keep.append(t)
        self.transports = keep

    def _port(self) -> int:
        self._next_port += 1
        return self._next_port
