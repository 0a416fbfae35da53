"""The clock the broker runs on, injected everywhere time is read.

One object instead of `time.time_ns() // 1_000_000` scattered through the code, so that tests and
the cluster simulation can drive time (ManualClock) and every component agrees on "now".
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (record timestamps, expiry, timeouts)."""
        ...


class SystemClock:
    __slots__ = ()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to."""

    __slots__ = ("_now",)

    def __init__(self, now_ms: int = 0) -> None:
        self._now = now_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        self._now += ms

    def set(self, now_ms: int) -> None:
        self._now = now_ms


SYSTEM_CLOCK = SystemClock()
