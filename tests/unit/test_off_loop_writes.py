"""Issue 24: the broker's periodic checkpoints, a roll's snapshot and sealed indexes, and the
flush policy's flushes run on I/O threads, not on the event loop: while one is held up in the
file system (a fault hook blocks it, as a busy disk would) the loop keeps appending, and what
waits for the write (the flush's acknowledgement) waits."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from helpers.recording_fs import Hold, RecordingFileSystem
from helpers.wait import wait_until_async

from broker.group_commit import GroupCommit
from broker.housekeeping import Housekeeper
from broker.log_io import LogIO
from broker.partition import AppendOrigin, Partition
from broker.partition.replica_state import Assignment
from protocol.clock import ManualClock
from protocol.records import Record, build_batch
from storage.checkpoint import RECOVERY_POINT_FILE, OffsetCheckpoint
from storage.config import LogConfig
from storage.fs import OS_FS

NOW = 1_000_000


def _open(tmp_path: Path, hold: Hold, cfg: LogConfig, gc: GroupCommit, io: LogIO) -> Partition:
    p = Partition.open(tmp_path, "t", 0, cfg, 1, ManualClock(NOW), gc, fs=RecordingFileSystem(fault=hold),
                       offload=io)
    p.become_leader(Assignment((1,), frozenset({1}), 1, 0, 0))
    return p


def _put(p: Partition, n: int = 1) -> None:
    for _ in range(n):
        p.append(build_batch([Record(0, 0, b"k", b"v" * 50)]), AppendOrigin.CLIENT)


async def test_a_checkpoint_is_written_on_the_io_thread_while_the_loop_appends(tmp_path: Path) -> None:
    hold = Hold("sync", RECOVERY_POINT_FILE + ".tmp")
    gc, io = GroupCommit(), LogIO()
    p = _open(tmp_path, hold, LogConfig(), gc, io)
    _put(p, 3)
    p._log.flush()  # recovery point 3, not yet in its file
    keeper = Housekeeper(None, ManualClock(NOW), 60_000, 60_000, 60_000, io_of=lambda _: io)  # type: ignore[arg-type]
    hold.armed, hold.threads = True, {}
    tidy = asyncio.ensure_future(keeper.tidy(p, retention_due=False, expiry_due=False))
    await wait_until_async(hold.entered.is_set, message="the checkpoint's fsync to start")
    _put(p, 2)  # the loop goes on while the fsync is held
    assert p.log_end_offset == 5 and not tidy.done()
    hold.release.set()
    await asyncio.wait_for(tidy, 10)
    assert OffsetCheckpoint(OS_FS, tmp_path / "t-0" / RECOVERY_POINT_FILE).read() == 3
    assert threading.get_ident() not in hold.ran_on("sync", RECOVERY_POINT_FILE + ".tmp")
    p.close()
    gc.close()
    io.close()


async def test_a_rolls_snapshot_and_sealed_indexes_are_written_on_the_io_thread(tmp_path: Path) -> None:
    hold = Hold("none", "")
    gc, io = GroupCommit(), LogIO()
    p = _open(tmp_path, hold, LogConfig(segment_bytes=300, index_interval_bytes=1), gc, io)
    hold.threads = {}
    _put(p, 8)  # a few rolls
    assert len(p._log.segment_base_offsets) > 2
    await wait_until_async(lambda: io.pending == 0, message="the roll writes to finish")
    loop_thread = threading.get_ident()
    snapshots, indexes = hold.ran_on("create", ".snapshot.tmp"), hold.ran_on("pwrite", ".index")
    assert snapshots and loop_thread not in snapshots
    assert indexes and loop_thread not in indexes
    p.close()
    gc.close()
    io.close()


async def test_the_flush_policys_flush_runs_on_the_sync_thread_and_the_append_waits_for_it(tmp_path: Path) -> None:
    gc, io = GroupCommit(), LogIO()
    p = _open(tmp_path, Hold("none", ""), LogConfig(flush_messages=1), gc, io)
    hold = Hold("sync", "00000000000000000000.log")
    p._log.fs.fault = hold  # type: ignore[attr-defined]
    hold.armed = True
    _put(p)
    flush = p.flush_wait
    assert flush is not None and p._log.recovery_point == 0  # asked for, not run inline
    await wait_until_async(hold.entered.is_set, message="the flush's fsync to start")
    _put(p)  # the loop appends on meanwhile
    assert not flush.done() and p._log.recovery_point == 0
    hold.release.set()
    await asyncio.wait_for(flush, 10)
    assert p._log.recovery_point >= 1
    assert threading.get_ident() not in hold.ran_on("sync", ".log")
    assert p.flush_wait is not None
    await asyncio.wait_for(p.flush_wait, 10)
    assert p._log.recovery_point == 2
    p.close()
    gc.close()
    io.close()


async def test_a_roll_flushes_the_closed_segments_without_a_flush_policy(tmp_path: Path) -> None:
    """Kafka flushes at each roll, so a restart after a crash re-checks the active segment only;
    without it the recovery point stayed where the last flush or clean shutdown left it, and
    bench/scale.py's SIGKILL restart grew with everything written since (0.6-1.3 s per GiB)."""
    gc, io = GroupCommit(), LogIO()
    p = _open(tmp_path, Hold("none", ""), LogConfig(segment_bytes=300), gc, io)
    _put(p, 8)  # a few rolls, no flush policy
    assert len(p._log.segment_base_offsets) > 2
    assert p.flush_wait is None  # no produce answer waits for it
    active = p._log.segment_base_offsets[-1]
    await wait_until_async(lambda: p._log.recovery_point >= active, message="the roll's flush")
    assert p._log.recovery_point <= p.log_end_offset
    p.close()
    gc.close()
    io.close()
