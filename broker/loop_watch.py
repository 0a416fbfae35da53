"""Notice when the event loop stops turning, and say what holds it.

Everything a broker does shares one loop: work that runs long on it stalls every request, every
replica fetch and every heartbeat, and a broker stalled past its session is fenced. The chaos
campaign saw restarted brokers go silent for ~20 s with nothing in their logs to say why. So a
beat on the loop records when it last ran, and a thread beside the loop, which keeps running while
the loop is stuck, logs the stack the loop is stuck in once the beat is late; when the loop turns
again the stall's length is logged and counted (``ketch_event_loop_stalls_total``).

Shorter holds count too: every gap of 100 ms or more between two beats
(``ketch_event_loop_stalls_100ms_total``, stalls of a second or more included), what a client's
produce latency feels long before a session is lost — issue 24's goal is none under load. The beat
comes every 20 ms and a stall is counted by the gap between two beats, so no hold as long as a
threshold is missed; one up to a beat shorter may be counted. Gaps are measured on the broker's
monotonic clock (injected: a test moves a manual clock while it holds the loop, and the length of
the hold it sees is the one it made, whatever else the machine is doing).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import traceback

import structlog

from protocol.clock import SYSTEM_CLOCK, Clock

from .metrics import BrokerMetrics

log = structlog.get_logger(__name__)

STALL_S = 1.0  # a broker's heartbeats go out every ~0.75 s at the default session: later is a stall
SHORT_STALL_S = 0.1
BEAT_S = 0.02  # the beat on the loop
WATCH_S = 0.1  # how often the thread beside it looks


class LoopWatch:
    def __init__(self, metrics: BrokerMetrics, stall_s: float = STALL_S, clock: Clock = SYSTEM_CLOCK) -> None:
        self.metrics = metrics
        self.stall_s = stall_s
        self.clock = clock
        self._beat = self._now()
        self._loop_thread = threading.get_ident()
        self._reported = False  # the stack of the stall going on now has been logged
        self._stop = threading.Event()
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None

    def _now(self) -> float:
        return self.clock.monotonic()

    def start(self) -> None:
        self._loop_thread = threading.get_ident()
        self._beat = self._now()
        self._task = asyncio.get_running_loop().create_task(self._beats())
        self._thread = threading.Thread(target=self._watch, name="loop-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()

    async def _beats(self) -> None:
        while True:
            await asyncio.sleep(BEAT_S)
            now = self._now()
            gap = now - self._beat
            self._beat = now
            if gap >= SHORT_STALL_S:
                self.metrics.loop_stalls_100ms += 1
                self.metrics.loop_stall_100ms_seconds += gap
                if gap >= self.stall_s:
                    self.metrics.loop_stalls += 1
                    self.metrics.loop_stall_seconds += gap
                    log.warning("event loop stalled", seconds=round(gap, 3))
            self._reported = False

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_S):
            late = self._now() - self._beat
            if late < self.stall_s or self._reported:
                continue
            self._reported = True
            frame = sys._current_frames().get(self._loop_thread)
            stack = "".join(traceback.format_stack(frame, limit=25)) if frame is not None else "(no frame)"
            log.warning("event loop stuck", seconds=round(late, 3), stack=stack)
