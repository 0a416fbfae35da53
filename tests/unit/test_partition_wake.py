"""A request parked on a partition (a fetch's long poll, an acks=all produce) resumes on the loop
turn after the partition moves: every fetch that waits for data pays this hop on each wake."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.partition import Partition, wait_for_change
from broker.partition.replica_state import Assignment
from protocol.clock import ManualClock
from storage.config import LogConfig


async def test_a_parked_wait_resumes_one_loop_turn_after_the_partition_moves(tmp_path: Path) -> None:
    p = Partition.open(tmp_path, "t", 0, LogConfig(), 1, ManualClock(1_000))
    p.become_leader(Assignment((1,), frozenset({1}), 1, 0, 0))
    try:
        parked = asyncio.get_running_loop().create_task(wait_for_change([p], 30.0))
        await asyncio.sleep(0)
        assert p._waiters and not parked.done()
        p.notify()
        await asyncio.sleep(0)  # one turn: the parked task runs in it (3.11's wait_for needed two)
        assert parked.done() and parked.exception() is None
        assert p._waiters == []
    finally:
        p.close()


async def test_a_parked_wait_ends_at_its_timeout_and_leaves_no_waiter(tmp_path: Path) -> None:
    p = Partition.open(tmp_path, "t", 0, LogConfig(), 1, ManualClock(1_000))
    try:
        await wait_for_change([p], 0.01)
        assert p._waiters == []
    finally:
        p.close()


async def test_a_parked_wait_on_many_partitions_tells_which_of_them_moved(tmp_path: Path) -> None:
    """What lets a fetch woken for one partition of its session read that one alone."""
    parts = [Partition.open(tmp_path / str(i), "t", i, LogConfig(), 1, ManualClock(1_000)) for i in range(5)]
    try:
        parked = asyncio.get_running_loop().create_task(wait_for_change(parts, 30.0))
        await asyncio.sleep(0)
        parts[3].notify()
        parts[1].notify()  # in the same turn, before the parked task runs
        parts[3].notify()
        assert await parked == [parts[3], parts[1]]
        assert all(p._waiters == [] for p in parts)
        assert await wait_for_change(parts, 0.01) == []  # the time was up: nothing moved
    finally:
        for p in parts:
            p.close()
