"""The connection layer applies the front door's rules (broker/admission.py): a connection over a
cap is closed at once, reading stops while the request memory is spent or the peer does not read
its answers, and an idle connection is closed — driven through a fake transport, no sockets."""

from __future__ import annotations

import asyncio
from typing import Any

from helpers.wait import wait_until_async

from broker.admission import Admission, Limits
from broker.apis import ApiTable
from broker.connection import Connection, ConnectionRegistry
from broker.metrics import BrokerMetrics
from protocol.clock import ManualClock
from protocol.framing import encode_request
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse


class _Transport(asyncio.Transport):
    def __init__(self, ip: str = "10.0.0.1") -> None:
        super().__init__()
        self.ip = ip
        self.written: list[bytes] = []
        self.closed = False
        self.paused = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return (self.ip, 40000) if name == "peername" else default

    def write(self, data: bytes | bytearray | memoryview) -> None:  # type: ignore[override]
        self.written.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        assert not self.paused, "paused twice"
        self.paused = True

    def resume_reading(self) -> None:
        assert self.paused, "resumed while reading"
        self.paused = False


class _Gate:
    """An ApiVersions handler that answers only when let through: requests stay in flight."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.started = 0

    async def handle(self, ctx: Any, client: Any, header: Any, req: Any) -> ApiVersionsResponse:
        self.started += 1
        await self.open.wait()
        return ApiVersionsResponse(error_code=0, api_keys=[])


def _setup(limits: Limits, clock: ManualClock | None = None, pipelined: int = 100
           ) -> tuple[ConnectionRegistry, _Gate, ApiTable]:
    gate = _Gate()
    table = ApiTable({18: gate.handle}, {18: (0, 3)}, frozenset())
    registry = ConnectionRegistry(BrokerMetrics(), 1 << 20, pipelined, lambda _: None,
                                  admission=Admission(limits), clock=clock or ManualClock())
    return registry, gate, table


def _connect(registry: ConnectionRegistry, table: ApiTable, ip: str = "10.0.0.1", protected: bool = False
             ) -> tuple[Connection, _Transport]:
    conn = Connection(object(), table, registry, ("127.0.0.1", 9092), inter_broker=protected)
    t = _Transport(ip)
    conn.connection_made(t)
    return conn, t


def _request(n: int, pad: int = 0) -> bytes:
    """An ApiVersions v0 request frame, `pad` bytes longer than it needs (v0 ignores trailing bytes)."""
    frame = encode_request(ApiVersionsRequest(), 0, n, "t")
    body = frame[4:] + b"\0" * pad
    return len(body).to_bytes(4, "big") + body


async def test_a_connection_over_the_per_address_cap_is_closed_at_once_and_counted() -> None:
    registry, _, table = _setup(Limits(max_connections_per_ip=2))
    conns = [_connect(registry, table) for _ in range(3)]
    assert [t.closed for _, t in conns] == [False, False, True]
    assert len(registry) == 2
    assert registry.metrics.connections_aborted["too many connections from one address"] == 1
    _, other = _connect(registry, table, ip="10.0.0.2")
    assert not other.closed
    conns[0][0].connection_lost(None)
    conns[2][0].connection_lost(None)  # the refused one's loss frees nothing it did not hold
    assert registry.admission.per_ip == {"10.0.0.1": 1, "10.0.0.2": 1}
    _, again = _connect(registry, table)
    assert not again.closed
    # the brokers' own listeners are never refused
    assert not any(_connect(registry, table, protected=True)[1].closed for _ in range(5))


async def test_reading_stops_past_a_connections_share_and_resumes_when_answers_free_it() -> None:
    registry, gate, table = _setup(Limits(connection_max_request_bytes=3000))
    conn, t = _connect(registry, table)
    conn.data_received(_request(1, 1000) + _request(2, 1000))
    assert not t.paused
    conn.data_received(_request(3, 1000)[:10])  # the next frame's size is known: over the share
    assert t.paused
    await wait_until_async(lambda: gate.started == 2)
    assert registry.admission.held == 2 * len(_request(1, 1000)) - 8
    gate.open.set()
    await wait_until_async(lambda: len(t.written) == 2, message="both answers")
    assert not t.paused and registry.admission.held == len(_request(3, 1000)) - 4  # reserved for the third
    conn.data_received(_request(3, 1000)[10:])
    await wait_until_async(lambda: len(t.written) == 3)
    assert registry.admission.held == 0


async def test_a_request_larger_than_the_share_is_admitted_alone() -> None:
    registry, gate, table = _setup(Limits(connection_max_request_bytes=100, queued_max_request_bytes=100))
    conn, t = _connect(registry, table)
    gate.open.set()
    conn.data_received(_request(1, 5000))
    await wait_until_async(lambda: len(t.written) == 1)
    assert not t.paused and registry.admission.held == 0


async def test_a_spent_pool_stops_every_client_connection_until_memory_comes_back() -> None:
    registry, gate, table = _setup(Limits(connection_max_request_bytes=10_000, queued_max_request_bytes=3000))
    a, ta = _connect(registry, table, ip="10.0.0.1")
    b, tb = _connect(registry, table, ip="10.0.0.2")
    broker, tbroker = _connect(registry, table, ip="10.0.0.3", protected=True)
    a.data_received(_request(1, 2500))
    b.data_received(_request(2, 2500)[:8])  # the pool cannot hold it yet
    assert tb.paused and not ta.paused
    broker.data_received(_request(3, 2500)[:8])  # a broker's connection draws on no pool
    assert not tbroker.paused
    gate.open.set()
    await wait_until_async(lambda: not tb.paused, message="b to read again once a's answer freed the pool")
    b.data_received(_request(2, 2500)[8:])
    await wait_until_async(lambda: len(tb.written) == 1)
    a.connection_lost(None)
    b.connection_lost(None)
    broker.connection_lost(None)
    assert registry.admission.held == 0


async def test_a_closed_connection_gives_back_what_it_held_and_reserved() -> None:
    registry, gate, table = _setup(Limits())
    conn, t = _connect(registry, table)
    conn.data_received(_request(1, 100) + _request(2, 100000)[:50])
    await wait_until_async(lambda: gate.started == 1)
    assert registry.admission.held > 100000
    conn.connection_lost(None)
    await wait_until_async(lambda: registry.admission.held == 0, message="the pool to be whole again")
    assert registry.admission.open == 0


async def test_a_peer_that_does_not_read_its_answers_is_not_read_either() -> None:
    registry, gate, table = _setup(Limits())
    gate.open.set()
    conn, t = _connect(registry, table)
    conn.pause_writing()  # the transport's buffer is over its high-water mark
    assert t.paused
    conn.resume_writing()
    assert not t.paused


async def test_the_pipelining_cap_and_the_write_buffer_pause_reading_independently() -> None:
    registry, gate, table = _setup(Limits(), pipelined=2)
    conn, t = _connect(registry, table)
    conn.data_received(_request(1) + _request(2))
    assert t.paused
    conn.pause_writing()
    gate.open.set()
    await wait_until_async(lambda: len(t.written) == 2)
    assert t.paused  # answers drained, but the peer still does not read them
    conn.resume_writing()
    assert not t.paused


async def test_an_idle_connection_is_closed_on_the_monotonic_clock_but_not_one_waiting_for_us() -> None:
    clock = ManualClock()
    registry, gate, table = _setup(Limits(idle_ms=1000), clock)
    quiet, tq = _connect(registry, table)
    waiting, tw = _connect(registry, table)
    talking, tt = _connect(registry, table)
    waiting.data_received(_request(1))  # parked in its handler: busy, not idle
    clock.advance(600)
    talking.data_received(_request(2)[:2])  # a byte is activity, whatever it is
    clock.advance(400)
    registry.close_idle()
    assert (tq.closed, tw.closed, tt.closed) == (True, False, False)
    assert registry.metrics.connections_aborted["idle"] == 1
    clock.set(10**12)  # a wall-clock step closes nothing
    registry.close_idle()
    assert not tt.closed
    clock.advance(600)
    registry.close_idle()
    assert tt.closed and not tw.closed
