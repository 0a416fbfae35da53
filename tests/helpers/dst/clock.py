"""Each simulated machine's clock: the loop's virtual time, with a wall clock that can be stepped.

Monotonic time is the loop's time itself, so a component's `clock.monotonic()` deadline and an
asyncio timeout agree, as they do on a real machine. The wall clock is virtual time plus an epoch
plus this machine's offset, which the nemesis steps forward or back (an administrator or NTP
setting the clock): what is written down moves, no timeout may.
"""

from __future__ import annotations

from .loop import SimLoop

EPOCH_MS = 1_790_000_000_000  # 2026: timestamps look like real ones in a trace


class SimClock:
    __slots__ = ("_loop", "offset_ms")

    def __init__(self, loop: SimLoop) -> None:
        self._loop = loop
        self.offset_ms = 0

    def now_ms(self) -> int:
        return EPOCH_MS + int(self._loop.time() * 1000) + self.offset_ms

    def monotonic_ms(self) -> int:
        return int(self._loop.time() * 1000)

    def monotonic(self) -> float:
        return self._loop.time()
