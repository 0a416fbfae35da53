"""Issue 24: a log's background writes (checkpoints, a roll's snapshot and sealed indexes) are
taken on the owner's thread and done elsewhere, and never land after a write of the owner's
that they would undo (storage/offload.py): a truncation's recovery point is not overwritten by
a checkpoint taken before it, a roll's snapshot of a log since truncated is never written, and
an off-thread write that is running holds a truncation back until it is done."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from _batches import make_batch
from helpers.recording_fs import RecordingFileSystem
from helpers.wait import wait_until

from storage import LogConfig, PartitionLog
from storage.checkpoint import LEADER_EPOCH_FILE, RECOVERY_POINT_FILE, CheckpointFile, OffsetCheckpoint
from storage.fs import OS_FS
from storage.producer_state import snapshot_path


class Queued:
    """An Offload that keeps the writes until the test runs them."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Callable[[], None], Callable[[], None]]] = []

    def submit(self, work: Callable[[], None], then: Callable[[], None]) -> None:
        self.jobs.append((work, then))

    def run_all(self) -> None:
        jobs, self.jobs = self.jobs, []
        for work, then in jobs:
            work()
            then()


def _rp(d: Path) -> int | None:
    return OffsetCheckpoint(OS_FS, d / RECOVERY_POINT_FILE).read()


def _epochs(d: Path) -> list[tuple[int, ...]]:
    return CheckpointFile(OS_FS, d / LEADER_EPOCH_FILE, 2).read()


def _two_epochs(log: PartitionLog) -> None:
    for epoch in (1, 2):
        for _ in range(5):
            log.append(make_batch(1), leader_epoch=epoch)
    log.high_watermark = 4  # a follower's: the truncation below stays above it
    log.flush()  # recovery point 10


def test_a_checkpoint_taken_before_a_truncation_writes_nothing_after_it(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig())
    _two_epochs(log)
    job = log.begin_checkpoint()  # recovery point 10, epochs [(1, 0), (2, 5)]
    assert job.writes_anything and _rp(d) == 0
    log.truncate_to(4)  # the epochs [(1, 0)] durably, at once (the recovery point on disk, 0, holds)
    assert (_rp(d), _epochs(d)) == (0, [(1, 0)])
    assert not log.write_checkpoint(job)  # late: its 10 would vouch for offsets about to be rewritten
    assert (_rp(d), _epochs(d)) == (0, [(1, 0)])
    log.append(make_batch(1), leader_epoch=3)
    log.flush()
    assert log.write_checkpoint(log.begin_checkpoint())
    assert (_rp(d), _epochs(d)) == (5, [(1, 0), (3, 4)])
    log.close()


def test_a_rolls_writes_wait_for_the_offload_and_are_dropped_after_a_truncation(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    q = Queued()
    batch = make_batch(1, producer_id=7, base_sequence=0)
    log = PartitionLog.open(d, LogConfig(segment_bytes=len(batch) * 3), offload=q)
    for seq in range(4):
        log.append(make_batch(1, producer_id=7, base_sequence=seq), leader_epoch=0)  # rolls at 3
    assert log.segment_base_offsets == [0, 3] and len(q.jobs) == 1
    assert not snapshot_path(d, 3).exists()  # nothing written by the roll itself
    q.run_all()
    assert snapshot_path(d, 3).exists()

    for seq in range(4, 7):
        log.append(make_batch(1, producer_id=7, base_sequence=seq), leader_epoch=0)  # rolls at 6
    assert log.segment_base_offsets == [0, 3, 6] and len(q.jobs) == 1
    log.high_watermark = 3
    log.truncate_to(5)  # the sealed segment [3, 6) is active again, cut at 5
    index = d / "00000000000000000003.index"
    before = index.read_bytes()
    q.run_all()  # the roll at 6, taken before the truncation: dropped
    assert not snapshot_path(d, 6).exists() and index.read_bytes() == before
    log.close()


def test_writes_queued_for_a_deleted_log_write_nothing(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    q = Queued()
    log = PartitionLog.open(d, LogConfig(segment_bytes=len(make_batch(1)) * 2), offload=q)
    for _ in range(3):
        log.append(make_batch(1), leader_epoch=0)
    assert q.jobs
    log.delete()
    q.run_all()
    assert not d.exists()


class SpyLock:
    """An RLock that notes when a thread had to wait for it."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.waited = threading.Event()

    def __enter__(self) -> SpyLock:
        if not self._lock.acquire(blocking=False):
            self.waited.set()
            self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_a_truncation_waits_for_a_checkpoint_being_written(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    entered, release = threading.Event(), threading.Event()

    def hold(op: str, path: Path) -> None:  # the checkpoint's epoch file write, on its thread
        if op == "sync" and path.name == LEADER_EPOCH_FILE + ".tmp" and threading.current_thread().name == "ckpt":
            entered.set()
            assert release.wait(10)

    log = PartitionLog.open(d, LogConfig(), fs=RecordingFileSystem(fault=hold))
    _two_epochs(log)
    spy = SpyLock()
    log._guard.lock = spy  # type: ignore[assignment]  # noqa: SLF001 - what the test watches
    job = log.begin_checkpoint()
    writer = threading.Thread(target=log.write_checkpoint, args=(job,), name="ckpt")
    writer.start()
    wait_until(entered.is_set, message="the checkpoint to be writing")
    truncation = threading.Thread(target=log.truncate_to, args=(4,))
    truncation.start()
    wait_until(spy.waited.is_set, message="the truncation to wait for the checkpoint")
    release.set()
    writer.join(10)
    truncation.join(10)
    assert not writer.is_alive() and not truncation.is_alive()
    assert (_rp(d), _epochs(d)) == (4, [(1, 0)])  # the truncation's, written after the checkpoint
    log.close()
