"""The marker sender's retries run on the monotonic clock: a host's wall clock stepped back (NTP,
an administrator) must not hold them back. Simulation seed 3258 (120 s): the coordinator's
wall clock went back an hour while a `__consumer_offsets` leader was down; the markers owed to
that partition were due an hour later, the transaction stayed prepared, its offsets pending --
the copier's output committed without its offsets, so a restarted copier would copy it again."""

from __future__ import annotations

import asyncio

from helpers import free_port

from broker.txn.machine import MarkerJob
from broker.txn.sender import MarkerSender
from protocol.clock import ManualClock
from protocol.topic_partition import TopicPartition


async def test_a_wall_clock_stepped_back_does_not_hold_marker_retries() -> None:
    clock = ManualClock(10_000_000)
    dead = ("127.0.0.1", free_port())  # nothing listens: every attempt fails at once
    attempts: list[int] = []

    def address_of(node: int) -> tuple[str, int]:
        attempts.append(node)
        return dead

    sender = MarkerSender(1, lambda tp: 2, address_of, clock, lambda done: None, retry_backoff_ms=100)
    sender.start()
    try:
        sender.add(MarkerJob("t", 7, 0, True, 0, frozenset({TopicPartition("__consumer_offsets", 1)})))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while not attempts:
            assert loop.time() < deadline, "the first attempt never went out"
            await asyncio.sleep(0.01)
        clock.set(clock.now_ms() - 3_600_000)  # the wall clock steps back an hour
        clock.advance(200)  # and time goes on: the backoff has passed
        sender.poke()
        while len(attempts) < 2:
            assert loop.time() < deadline, "no retry: it waits for the wall clock to come back"
            await asyncio.sleep(0.01)
    finally:
        await sender.stop()
