"""Group commit: appends made in one event-loop turn share one fsync per log, and nobody is
released before the flush that covers their append (issue 11, item 1)."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest
from helpers.wait import wait_until_async

from broker.group_commit import GroupCommit
from broker.partition import AppendOrigin, Partition
from broker.partition.replica_state import Assignment
from protocol.clock import ManualClock
from protocol.records import Record, build_batch
from storage.config import LogConfig


def _open(data: Path, name: str, gc: GroupCommit) -> Partition:
    p = Partition.open(data, name, 0, LogConfig(), 1, ManualClock(0), gc)
    p.become_leader(Assignment((1,), frozenset({1}), 1, 0, 0))
    return p


def _append(p: Partition) -> None:
    p.append(build_batch([Record(0, 0, b"k", b"v")]), AppendOrigin.COORDINATOR)


async def test_one_fsync_per_log_per_turn_and_waiters_released_after_it(tmp_path: Path) -> None:
    gc = GroupCommit()
    a, b = _open(tmp_path, "a", gc), _open(tmp_path, "b", gc)
    waits = []
    for _ in range(5):
        _append(a)
        waits.append(asyncio.ensure_future(a.made_durable()))
    _append(b)
    waits.append(asyncio.ensure_future(b.made_durable()))
    assert a._log.synced_offset < a.log_end_offset  # nothing synced within the turn
    assert not any(w.done() for w in waits)
    await asyncio.gather(*waits)
    assert (gc.fsyncs, gc.waiters) == (2, 6)
    assert a._log.synced_offset == a.log_end_offset == 5
    assert b._log.synced_offset == b.log_end_offset == 1
    a.close()
    b.close()


async def test_a_flush_that_fails_fails_its_waiters(tmp_path: Path) -> None:
    gc = GroupCommit()
    p = _open(tmp_path, "gone", gc)
    _append(p)
    wait = p.made_durable()
    p.close()  # a topic deleted between the append and the end of the turn
    with pytest.raises(Exception, match="closed"):
        await wait


async def test_the_sync_runs_off_the_event_loop_and_later_appends_wait_for_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow disk must not stall the loop (issue 24), and an append made while a sync is running
    is not covered by it: its waiter is released only by the sync after."""
    gate = threading.Event()
    entered = threading.Event()
    real = os.fdatasync

    def slow_fdatasync(fd: int) -> None:
        entered.set()
        assert gate.wait(10), "the test never released the disk"
        real(fd)

    monkeypatch.setattr(os, "fdatasync", slow_fdatasync)
    gc = GroupCommit()
    p = _open(tmp_path, "slow", gc)
    _append(p)
    first = asyncio.ensure_future(p.made_durable())
    await wait_until_async(entered.is_set, 5, message="the first sync to reach the disk")
    ticks = 0
    for _ in range(20):  # the loop keeps turning while the fsync is blocked
        await asyncio.sleep(0)
        ticks += 1
    _append(p)
    second = asyncio.ensure_future(p.made_durable())
    await asyncio.sleep(0)
    assert ticks == 20 and not first.done() and not second.done()
    gate.set()
    await first
    assert p._log.synced_offset >= 1
    await second
    assert p._log.synced_offset == p.log_end_offset == 2
    assert gc.fsyncs == 2
    p.close()
    gc.close()


async def test_a_truncation_during_a_sync_keeps_the_synced_offset_below_the_new_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offsets rewritten after a truncation were not covered by the sync that started before it."""
    gate = threading.Event()
    entered = threading.Event()
    real = os.fdatasync

    def slow_fdatasync(fd: int) -> None:
        entered.set()
        assert gate.wait(10)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", slow_fdatasync)
    gc = GroupCommit()
    p = _open(tmp_path, "trunc", gc)
    for _ in range(3):
        _append(p)
    wait = asyncio.ensure_future(p.made_durable())
    await wait_until_async(entered.is_set, 5, message="the sync to reach the disk")
    p._log.truncate_to(1)
    gate.set()
    await wait
    assert p._log.synced_offset <= 1
    p.close()
    gc.close()


async def test_a_slow_log_directory_delays_only_its_own_logs_syncs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each log directory has its own sync thread (issue 24): a disk that hangs in fdatasync holds
    the logs on it, not a coordinator's log on another disk."""
    slow_dir, fast_dir = tmp_path / "slow-disk", tmp_path / "fast-disk"
    slow_dir.mkdir()
    fast_dir.mkdir()
    gate = threading.Event()
    entered = threading.Event()
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(slow_dir)):
            entered.set()
            assert gate.wait(10), "the test never released the disk"
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    gc = GroupCommit()
    slow, fast = _open(slow_dir, "held", gc), _open(fast_dir, "free", gc)
    _append(slow)
    _append(fast)
    held = asyncio.ensure_future(slow.made_durable())
    free = asyncio.ensure_future(fast.made_durable())
    try:
        await wait_until_async(entered.is_set, 5, message="the slow disk's sync to begin")
        await asyncio.wait_for(free, 5)
        assert fast._log.synced_offset == fast.log_end_offset == 1
        assert not held.done()
    finally:
        gate.set()
    await held
    assert slow._log.synced_offset == 1
    slow.close()
    fast.close()
    gc.close()
