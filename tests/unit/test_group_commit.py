"""Group commit: appends made in one event-loop turn share one fsync per log, and nobody is
released before the flush that covers their append (issue 11, item 1)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.group_commit import GroupCommit
from broker.partition import AppendOrigin, Partition
from broker.replication.replica_state import Assignment
from protocol.records import Record, build_batch
from storage.clock import ManualClock
from storage.config import LogConfig


def _open(data: Path, name: str, gc: GroupCommit) -> Partition:
    p = Partition.open(data, name, 0, LogConfig(), 1, ManualClock(0).now_ms, gc)
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
    assert a.log.recovery_point < a.log.log_end_offset  # nothing flushed within the turn
    assert not any(w.done() for w in waits)
    await asyncio.gather(*waits)
    assert (gc.fsyncs, gc.waiters) == (2, 6)
    assert a.log.recovery_point == a.log.log_end_offset == 5
    assert b.log.recovery_point == b.log.log_end_offset == 1
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
