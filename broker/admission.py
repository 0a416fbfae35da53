"""The front door's decisions, sans I/O: which connections are let in, how many request bytes
may be held at once, when a connection has been idle too long.

Kafka's settings, with Kafka's meanings: `max.connections` (a broker-wide cap), and
`max.connections.per.ip` with `max.connections.per.ip.overrides` (a client cannot take every
connection), `queued.max.request.bytes` (the memory pool every request buffer comes from: when it
is spent, the broker stops reading sockets until answers give memory back) and
`connections.max.idle.ms`. Brokers' own connections (the inter-broker and controller listeners)
are *protected*: they count against none of these caps, so a flood of clients can neither starve
replication, markers and the quorum of connections nor of memory (Kafka exempts the inter-broker
listener from max.connections the same way).

The connection layer (broker/connection.py) asks; nothing here touches a socket or a clock, so each
rule is a unit test (tests/unit/test_admission.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

UNLIMITED = 2**31 - 1  # Kafka's default for the connection caps (Int.MaxValue)

TOO_MANY = "too many connections"
TOO_MANY_FROM_IP = "too many connections from one address"
IDLE = "idle"


def parse_ip_overrides(text: str) -> dict[str, int]:
    """Kafka's `max.connections.per.ip.overrides`: "ip:count,ip:count" (an IPv6 address keeps its
    colons: the count is after the last one). A ValueError says what is wrong."""
    out: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        host, sep, count = part.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"{part!r} is not ADDRESS:COUNT")
        out[host.strip().strip("[]")] = int(count)
    return out


@dataclass(frozen=True, slots=True)
class Limits:
    max_connections: int = UNLIMITED
    max_connections_per_ip: int = UNLIMITED
    per_ip_overrides: dict[str, int] = field(default_factory=dict)
    queued_max_request_bytes: int = 512 * 1024 * 1024  # every client connection together
    connection_max_request_bytes: int = 64 * 1024 * 1024  # one connection's share
    idle_ms: int = 600_000


class Admission:
    """Connections open per address and in all, and the request bytes held: read off a socket and
    not yet answered. Counts only unprotected (client) connections; see the module docstring."""

    __slots__ = ("limits", "per_ip", "open", "held")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.per_ip: Counter[str] = Counter()
        self.open = 0
        self.held = 0  # bytes of the memory pool in use

    # ---- connections ------------------------------------------------------------------------
    def connect(self, ip: str, protected: bool) -> str | None:
        """Let a new connection in (counted until `disconnect`), or say why not. A refused
        connection is not counted: the caller closes it at once."""
        if protected:
            return None
        lim = self.limits
        cap = lim.per_ip_overrides.get(ip, lim.max_connections_per_ip)
        if self.per_ip[ip] >= cap:
            return TOO_MANY_FROM_IP
        if self.open >= lim.max_connections:
            return TOO_MANY
        self.per_ip[ip] += 1
        self.open += 1
        return None

    def disconnect(self, ip: str, protected: bool) -> None:
        if protected:
            return
        self.open -= 1
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]

    # ---- request memory ---------------------------------------------------------------------
    def may_hold(self, conn_held: int, size: int, protected: bool) -> bool:
        """May a connection already holding `conn_held` bytes read a request of `size` bytes?
        Over its share or the pool, no — unless it would be alone (nothing held by the connection,
        or nothing in the pool): a request larger than a share, or than the pool, is admitted when
        it is the only one, so it waits but never deadlocks (socket.request.max.bytes still bounds
        it)."""
        lim = self.limits
        if conn_held and conn_held + size > lim.connection_max_request_bytes:
            return False
        return protected or not self.held or self.held + size <= lim.queued_max_request_bytes

    def take(self, size: int, protected: bool) -> None:
        if not protected:
            self.held += size

    def give(self, size: int, protected: bool) -> None:
        if not protected:
            self.held -= size

    # ---- idleness ---------------------------------------------------------------------------
    def idle(self, last_active_ms: int, now_ms: int, busy: bool) -> bool:
        """Has a connection been silent too long? One with a request still being handled (a
        long-polling fetch, a parked JoinGroup) is waiting for us, not idle."""
        return not busy and now_ms - last_active_ms >= self.limits.idle_ms

    def sweep_interval_s(self) -> float:
        """How often idle connections are looked for: a tenth of the timeout, 50 ms to 10 s, so
        one is closed at most ~10% late."""
        return min(10.0, max(0.05, self.limits.idle_ms / 10_000))
