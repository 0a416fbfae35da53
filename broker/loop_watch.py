"""Notice when the event loop stops turning, and say what holds it.

Everything a broker does shares one loop: work that runs long on it stalls every request, every
replica fetch and every heartbeat, and a broker stalled past its session is fenced. The chaos
campaign saw restarted brokers go silent for ~20 s with nothing in their logs to say why. So a
beat on the loop records when it last ran, and a thread beside the loop, which keeps running while
the loop is stuck, logs the stack the loop is stuck in once the beat is late; when the loop turns
again the stall's length is logged and counted (``ketch_event_loop_stalls_total``).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback

import structlog

from .metrics import BrokerMetrics

log = structlog.get_logger(__name__)

STALL_S = 1.0  # a broker's heartbeats go out every ~0.75 s at the default session: later is a stall
BEAT_S = 0.1


class LoopWatch:
    def __init__(self, metrics: BrokerMetrics, stall_s: float = STALL_S) -> None:
        self.metrics = metrics
        self.stall_s = stall_s
        self._beat = time.monotonic()
        self._loop_thread = threading.get_ident()
        self._reported = False  # the stack of the stall going on now has been logged
        self._stop = threading.Event()
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._loop_thread = threading.get_ident()
        self._beat = time.monotonic()
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
            now = time.monotonic()
            late = now - self._beat - BEAT_S
            self._beat = now
            if late >= self.stall_s:
                self.metrics.loop_stalls += 1
                self.metrics.loop_stall_seconds += late
                log.warning("event loop stalled", seconds=round(late, 3))
            self._reported = False

    def _watch(self) -> None:
        while not self._stop.wait(BEAT_S):
            late = time.monotonic() - self._beat - BEAT_S
            if late < self.stall_s or self._reported:
                continue
            self._reported = True
            frame = sys._current_frames().get(self._loop_thread)
            stack = "".join(traceback.format_stack(frame, limit=25)) if frame is not None else "(no frame)"
            log.warning("event loop stuck", seconds=round(late, 3), stack=stack)
