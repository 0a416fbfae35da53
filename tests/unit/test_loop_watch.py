"""The loop watch names the code that holds the event loop, while it holds it, and counts the stall."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from structlog.testing import capture_logs

from broker.loop_watch import LoopWatch
from broker.metrics import BrokerMetrics


def _hold_the_loop(seconds: float) -> None:
    time.sleep(seconds)  # the stall under test: blocking work on the loop


async def _turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0.05)


async def _watched(body: Callable[[BrokerMetrics], Awaitable[None]]) -> tuple[BrokerMetrics, list[dict[str, Any]]]:
    metrics = BrokerMetrics()
    watch = LoopWatch(metrics, stall_s=0.3)
    with capture_logs() as logs:
        watch.start()
        try:
            await body(metrics)
        finally:
            watch.stop()
    return metrics, logs


async def test_a_stall_is_logged_with_the_blocking_stack_and_counted() -> None:
    async def stall(metrics: BrokerMetrics) -> None:
        await _turns(3)
        _hold_the_loop(1.0)
        deadline = time.monotonic() + 5
        while metrics.loop_stalls == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    metrics, logs = await _watched(stall)
    stuck = [e for e in logs if e["event"] == "event loop stuck"]
    assert len(stuck) == 1, logs
    assert "_hold_the_loop" in stuck[0]["stack"]
    assert metrics.loop_stalls == 1
    assert 0.6 <= metrics.loop_stall_seconds <= 3.0
    stalled = [e for e in logs if e["event"] == "event loop stalled"]
    assert len(stalled) == 1 and stalled[0]["seconds"] >= 0.6


async def test_a_loop_that_keeps_turning_is_not_reported() -> None:
    async def keep_turning(metrics: BrokerMetrics) -> None:
        await _turns(20)

    metrics, logs = await _watched(keep_turning)
    assert metrics.loop_stalls == 0
    assert not [e for e in logs if e["event"].startswith("event loop")]
