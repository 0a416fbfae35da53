"""The active controller's periodic work, on whichever node's quorum leads.

Write the cluster-wide min.insync.replicas if the log has none (Kafka 4.1's activation record),
fence brokers whose heartbeats stopped, finish reassignments whose new replicas are in sync, start
the recovery elections of partitions nobody is known to hold whole (`recover`, recovery.py), and
every `rebalance_interval_ms` give partitions back to their preferred replica (Kafka's auto leader
rebalance). The controller decides all of it; each decision goes through the shell's one
serialized path like any request's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from protocol.clock import Clock
from protocol.errors import KafkaError

from .shell import ControllerShell

PERIOD_S = 0.5


async def run(shell: ControllerShell, clock: Clock, rebalance_interval_ms: int,
              recover: Callable[[], None] = lambda: None) -> None:
    c = shell.controller
    next_rebalance = clock.monotonic_ms() + rebalance_interval_ms
    while True:
        await asyncio.sleep(PERIOD_S)
        if not shell.active:
            continue
        with contextlib.suppress(KafkaError):  # leadership lost meanwhile: the next leader decides
            await shell.run(lambda: (c.activate(), None))
            await shell.run(lambda: (c.expire(clock.monotonic_ms()), None))
            await shell.run(lambda: (c.complete_reassignments(), None))
            recover()
            if clock.monotonic_ms() >= next_rebalance:
                next_rebalance = clock.monotonic_ms() + rebalance_interval_ms
                await shell.run(lambda: (c.rebalance_leaders(), None))
