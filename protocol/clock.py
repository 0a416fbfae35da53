"""The clock the broker and the client run on, injected everywhere time is read.

One object instead of `time.time()`, `time.monotonic()` and `loop.time()` scattered through the
code, so that tests and the cluster simulation can drive time (ManualClock) and every component
agrees on "now". Wall time is for what is written down (timestamps); monotonic time is for every
timeout, lease and deadline. This module is the only one that reads the system's clocks
(tests/unit/test_one_clock.py holds every other module to it).
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch: what is written down (record timestamps,
        expiry times kept in logs). It can step back or forward when the system clock is set."""
        ...

    def monotonic_ms(self) -> int:
        """Milliseconds on a clock that never steps: every timeout, session and lease, so that a
        wall-clock step cannot fence a broker or end a lease early."""
        ...

    def monotonic(self) -> float:
        """The same clock in seconds, for asyncio deadlines and durations."""
        ...


class SystemClock:
    __slots__ = ()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to: `advance` moves both clocks, `set` steps the wall
    clock alone (as an administrator or NTP would)."""

    __slots__ = ("_now", "_mono")

    def __init__(self, now_ms: int = 0) -> None:
        self._now = now_ms
        self._mono = now_ms  # a monotonic clock's origin is arbitrary: start both together

    def now_ms(self) -> int:
        return self._now

    def monotonic_ms(self) -> int:
        return self._mono

    def monotonic(self) -> float:
        return self._mono / 1000

    def advance(self, ms: int) -> None:
        self._now += ms
        self._mono += ms

    def set(self, now_ms: int) -> None:
        self._now = now_ms


SYSTEM_CLOCK = SystemClock()
