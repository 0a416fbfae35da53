"""Issue 23 item 5: sessions and leases run on the monotonic clock. A wall clock stepped forward
(an administrator, NTP) on the controller must not fence a broker whose heartbeats keep coming:
a fenced broker loses its leaderships while its own lease — measured on its monotonic clock —
still says it holds them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from helpers.wait import wait_until_async

from broker.config import BrokerConfig
from broker.server import BrokerServer
from protocol.messages.metadata_records import FenceBrokerRecord


class SteppableClock:
    """Real time, with a wall clock that can be stepped as `date -s` would."""

    def __init__(self) -> None:
        self.step_ms = 0

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.step_ms

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


async def test_a_wall_clock_step_fences_nobody(tmp_path: Path) -> None:
    clock = SteppableClock()
    # heartbeats every 2 s, fencing rounds every 0.5 s: several rounds see each heartbeat's time
    server = BrokerServer(BrokerConfig(listen="127.0.0.1:0", inter_broker_listen="127.0.0.1:0",
                                       controller_listen="127.0.0.1:0", data_dir=str(tmp_path),
                                       broker_session_timeout_ms=8000, broker_heartbeat_interval_ms=2000),
                          clock=clock)
    controller = server.controller
    fences: list[FenceBrokerRecord] = []
    expiries = 0
    armed = False
    replay_all, expire, heartbeat = server.metadata.replay_all, controller.expire, controller.heartbeat

    def watch_replay(offset: int, records: list[object]) -> None:
        fences.extend(r for r in records if isinstance(r, FenceBrokerRecord))
        replay_all(offset, records)

    def count_expire(now_ms: int) -> bytes | None:
        nonlocal expiries
        expiries += 1
        return expire(now_ms)

    def step_after_heartbeat(*args: Any) -> Any:
        out = heartbeat(*args)
        if armed:
            clock.step_ms = 3_600_000  # an hour forward, right after a heartbeat was taken
        return out

    server.metadata.replay_all = watch_replay  # type: ignore[method-assign]
    controller.expire = count_expire  # type: ignore[method-assign]
    controller.heartbeat = step_after_heartbeat  # type: ignore[method-assign]
    await server.start()
    try:
        node = server.cfg.node_id
        await wait_until_async(lambda: (b := controller.image.broker(node)) is not None and not b.fenced,
                               timeout=20, message="the broker unfenced")
        armed = True
        await wait_until_async(lambda: clock.step_ms, timeout=20, message="a heartbeat after arming")
        seen = expiries
        await wait_until_async(lambda: expiries >= seen + 6, timeout=20, message="six fencing rounds after the step")
        assert fences == []
        b = controller.image.broker(node)
        assert b is not None and not b.fenced
    finally:
        await server.stop()
