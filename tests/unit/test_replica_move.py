"""Moving a replica between log directories (broker/partition/move.py), on real files without a
broker: a future log copying the current one while it takes appends, truncations and a moved
log start, and the directory swap interrupted at every step."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from _batches import make_batch
from helpers.recording_fs import RecordingFileSystem

from broker.group_commit import GroupCommit
from broker.log_dirs import FUTURE_MARKER, LogDirs
from broker.log_io import LogIO
from broker.partition import AppendOrigin, Partition
from broker.partition.move import FutureCopy, MoveThrottle, ReplicaMove, commit_swap, create_future_dir
from broker.partition.replica_state import Assignment
from protocol.batch import iter_batches
from protocol.clock import ManualClock
from storage import LogConfig, PartitionLog
from storage.fs import OS_FS


def open_log(path: Path, **cfg: object) -> PartitionLog:
    return PartitionLog.open(path, LogConfig(**cfg))  # type: ignore[arg-type]


def everything(log: PartitionLog) -> list[tuple[int, int, bytes]]:
    """(base offset, leader epoch, the batch's bytes) of every readable batch."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        r = log.read(offset, 1 << 20)
        for pos, h in iter_batches(r.data):
            out.append((h.base_offset, h.partition_leader_epoch, bytes(r.data[pos:pos + h.size])))
        offset = r.next_offset
    return out


def produce(log: PartitionLog, n: int, *, epoch: int = 0, pid: int = 7, seq: list[int] | None = None) -> None:
    for _ in range(n):
        s = seq[0] if seq is not None else -1
        log.append(make_batch(3, value_size=200, producer_id=pid if seq is not None else -1,
                              producer_epoch=0 if seq is not None else -1, base_sequence=s), leader_epoch=epoch)
        if seq is not None:
            seq[0] += 3
    log.high_watermark = log.log_end_offset


def copy_until_caught_up(copy: FutureCopy, max_bytes: int = 1500) -> int:
    steps = 0
    while (chunk := copy.plan(max_bytes)) is not None:
        copy.apply(chunk)
        steps += 1
    return steps


def test_the_future_log_catches_up_through_appends_truncation_and_a_moved_log_start(tmp_path: Path) -> None:
    cur = open_log(tmp_path / "a" / "t-0", segment_bytes=4000)
    seq = [0]
    produce(cur, 30, seq=seq)
    fut = open_log(tmp_path / "b" / "t-0", segment_bytes=4000)
    copy = FutureCopy(cur, fut)
    # part of the way, then the current log moves on while the copy is behind
    for _ in range(5):
        chunk = copy.plan(1500)
        assert chunk is not None
        copy.apply(chunk)
    assert 0 < fut.log_end_offset < cur.log_end_offset
    produce(cur, 10, seq=seq)
    assert copy_until_caught_up(copy) > 0
    assert everything(fut) == everything(cur)
    # a follower's truncation of the current log, then other batches under a new epoch: the copy
    # drops what it took from beyond the cut
    cut = cur.log_end_offset - 9
    cur.truncate_to(cut)
    produce(cur, 4, epoch=3)
    copy_until_caught_up(copy)
    assert everything(fut) == everything(cur)
    assert fut.leader_epochs == cur.leader_epochs
    # DeleteRecords moves the log start: the swap's finish takes it over
    cur.delete_records_before(cur.log_end_offset - 20)
    copy.finish()
    assert (fut.log_start_offset, fut.high_watermark, fut.log_end_offset) == (
        cur.log_start_offset, cur.high_watermark, cur.log_end_offset)
    assert everything(fut) == everything(cur)
    assert fut.producer_state.get(7) is not None
    assert fut.producer_state.get(7).last_seq == cur.producer_state.get(7).last_seq  # type: ignore[union-attr]
    copy.detach()
    assert cur.on_truncate is None


def test_a_copy_that_falls_below_the_log_start_starts_over_there(tmp_path: Path) -> None:
    cur = open_log(tmp_path / "a" / "t-0", segment_bytes=2000)
    produce(cur, 20)
    fut = open_log(tmp_path / "b" / "t-0", segment_bytes=2000)
    copy = FutureCopy(cur, fut)
    chunk = copy.plan(800)
    assert chunk is not None
    copy.apply(chunk)
    cur.delete_records_before(cur.log_end_offset - 5)
    cur.apply_retention()
    copy_until_caught_up(copy)
    copy.finish()
    assert everything(fut) == everything(cur)
    assert fut.log_start_offset == cur.log_start_offset


def test_a_future_of_an_empty_log_with_a_later_start(tmp_path: Path) -> None:
    cur = open_log(tmp_path / "a" / "t-0")
    cur.truncate_fully_and_start_at(42)
    fut = open_log(tmp_path / "b" / "t-0")
    copy = FutureCopy(cur, fut)
    copy_until_caught_up(copy)
    copy.finish()
    assert (fut.log_start_offset, fut.log_end_offset) == (42, 42)
    produce(cur, 2)
    copy_until_caught_up(copy)
    assert everything(fut) == everything(cur)


def interrupted_copy(tmp_path: Path) -> tuple[PartitionLog, PartitionLog, Path]:
    """A current log of 30 batches (epoch 0) and a copy that took part of it when the broker
    stopped (closed unflushed, as a kill leaves it)."""
    cur = open_log(tmp_path / "a" / "t-0", segment_bytes=4000)
    produce(cur, 30)
    fut = open_log(tmp_path / "b" / "t-0", segment_bytes=4000)
    copy = FutureCopy(cur, fut)
    for _ in range(6):
        chunk = copy.plan(1500)
        assert chunk is not None
        copy.apply(chunk)
    copy.detach()  # what it would have heard of the current log from now on is lost with the process
    fut.close()
    return cur, fut, tmp_path / "b" / "t-0"


def resumed(cur: PartitionLog, future_dir: Path) -> tuple[FutureCopy, int | None, int]:
    """The copy opened again at start: (the copy, where it resumes, its log end before)."""
    fut = open_log(future_dir, segment_bytes=4000)
    copy = FutureCopy(cur, fut)
    before = fut.log_end_offset
    return copy, copy.resume(), before


def test_a_copy_found_at_start_goes_on_from_its_end(tmp_path: Path) -> None:
    cur, _, future_dir = interrupted_copy(tmp_path)
    produce(cur, 5)  # written after the restart, before the move went on
    copy, point, before = resumed(cur, future_dir)
    assert point == before > 0
    chunk = copy.plan(1500)
    assert chunk is not None and (chunk.truncate_to, chunk.restart_at) == (None, None)
    assert next(iter_batches(chunk.data))[1].base_offset == before  # on from where it stopped
    copy.apply(chunk)
    copy_until_caught_up(copy)
    copy.finish()
    assert everything(copy.future) == everything(cur)


def test_a_copy_found_at_start_is_cut_back_where_the_current_log_diverged(tmp_path: Path) -> None:
    """The current log was truncated below what the copy took and written anew under a later
    epoch, and the copy never heard of it (the broker stopped first): it keeps what agrees."""
    cur, _, future_dir = interrupted_copy(tmp_path)
    copy, _, before = resumed(cur, future_dir)
    copy.detach()
    copy.future.close()
    cut = before - 6
    cur.truncate_to(cut)
    produce(cur, 4, epoch=3)
    copy, point, _ = resumed(cur, future_dir)
    assert point == cut
    copy_until_caught_up(copy)
    copy.finish()
    assert everything(copy.future) == everything(cur) and copy.future.leader_epochs == cur.leader_epochs


def test_a_copy_found_at_start_beyond_the_current_logs_end_is_cut_to_it(tmp_path: Path) -> None:
    cur, _, future_dir = interrupted_copy(tmp_path)
    copy, _, before = resumed(cur, future_dir)
    copy.detach()
    copy.future.close()
    cur.truncate_to(before - 9)  # the current log lost a tail the copy holds (same epoch)
    copy, point, _ = resumed(cur, future_dir)
    assert point == cur.log_end_offset
    copy_until_caught_up(copy)
    assert everything(copy.future) == everything(cur)


def test_a_copy_found_at_start_missing_the_current_logs_first_batches_starts_over(tmp_path: Path) -> None:
    cur = open_log(tmp_path / "a" / "t-0")
    produce(cur, 10)
    fut = open_log(tmp_path / "b" / "t-0")
    fut.truncate_fully_and_start_at(9)
    fut.close()
    copy, point, _ = resumed(cur, tmp_path / "b" / "t-0")
    assert point is None
    copy_until_caught_up(copy)
    copy.finish()
    assert everything(copy.future) == everything(cur) and copy.future.log_start_offset == 0


def test_two_unfinished_copies_of_one_partition_are_both_removed_at_start(tmp_path: Path) -> None:
    a, b, c = (tmp_path / n for n in "abc")
    cur = PartitionLog.open(a / "t-0", LogConfig())
    produce(cur, 3)
    cur.close()
    for d in (b, c):
        create_future_dir(OS_FS, d, "t", 0)
    ld = LogDirs([str(a), str(b), str(c)], str(a), 1, "c", OS_FS)
    ld.prepare()
    assert ld.resume == {} and not (b / "t-0").exists() and not (c / "t-0").exists()
    assert ld.locate(("t", 0)) is ld.dirs[0]


STEPS = ["rename", "fsync_dir", "unlink", "fsync_dir"]


@pytest.mark.parametrize("fail_at", range(len(STEPS) + 1))
def test_the_swap_interrupted_at_any_step_leaves_one_whole_replica(tmp_path: Path, fail_at: int) -> None:
    """The swap retires the current directory, then takes the marker off the future one, each
    made durable before the next; stopped anywhere, the next start finds exactly one replica of
    the partition, holding everything (and, before the retirement, the copy to go on from)."""
    a, b = tmp_path / "a", tmp_path / "b"
    ld = LogDirs([str(a), str(b)], str(a), 1, "c", OS_FS)
    ld.prepare()
    cur = PartitionLog.open(a / "t-0", LogConfig())
    produce(cur, 12)
    future_dir = create_future_dir(OS_FS, b, "t", 0)
    assert (future_dir / FUTURE_MARKER).exists() and future_dir == b / "t-0"
    fut = PartitionLog.open(future_dir, LogConfig())
    copy = FutureCopy(cur, fut)
    copy_until_caught_up(copy)
    copy.finish()
    fut.flush()
    want = everything(cur)
    seen: list[str] = []

    def fault(op: str, path: Path) -> None:
        if op in STEPS:
            seen.append(op)
            if len(seen) == fail_at + 1:
                raise OSError("stopped here")

    fs = RecordingFileSystem(OS_FS, fault)
    if fail_at < len(STEPS):
        with pytest.raises(OSError):
            commit_swap(fs, cur.directory, future_dir, "abc")
    else:
        commit_swap(fs, cur.directory, future_dir, "abc")
    cur.release()
    fut.release()
    after = LogDirs([str(a), str(b)], str(a), 1, "c", OS_FS)
    after.prepare()
    where = after.where[("t", 0)]
    swapped = fail_at >= 1  # the current directory was retired: the future one is the replica
    assert where.path == (b if swapped else a)
    replicas = [d for d in (a, b) for p in d.iterdir() if p.name.startswith("t-") and not (p / FUTURE_MARKER).exists()]
    assert replicas == [where.path]
    # not swapped: the copy stays, marked, and the move goes on from it once the partition opens
    assert (b / "t-0" / FUTURE_MARKER).exists() == (not swapped)
    assert after.resume == ({} if swapped else {("t", 0): after.dirs[1]})
    reopened = PartitionLog.open(where.path / "t-0", LogConfig())
    assert everything(reopened) == want
    reopened.close()


def test_a_future_directory_whose_creation_was_interrupted_is_removed_at_start(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "t-0").mkdir(parents=True)

    def fault(op: str, path: Path) -> None:
        if op == "rename":
            raise OSError("stopped here")

    with pytest.raises(OSError):
        create_future_dir(RecordingFileSystem(OS_FS, fault), b, "t", 0)
    assert [p.name.endswith("-delete") for p in b.iterdir()] == [True]
    ld = LogDirs([str(a), str(b)], str(a), 1, "c", OS_FS)
    ld.prepare()
    assert ld.where[("t", 0)].path == a and ld.resume == {}
    assert [p.name for p in b.iterdir()] == ["meta.properties"]


class SimulatedTime:
    """A manual clock whose sleeps advance it at once: a throttled copy runs at full speed in the
    test while the time it waited is counted exactly."""

    def __init__(self) -> None:
        self.clock = ManualClock(1_000_000)
        self.waits: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.advance(max(1, round(seconds * 1000)))
        await asyncio.sleep(0)


async def move_once(tmp_path: Path, throttle: MoveThrottle | None) -> tuple[int, Partition]:
    """A partition of about 2 MB in dir a, moved to dir b: (its size, the partition after the move)."""
    a, b = tmp_path / "a", tmp_path / "b"
    dirs = LogDirs([str(a), str(b)], str(a), 1, "c", OS_FS)
    dirs.prepare()
    gc, io = GroupCommit(), LogIO()
    part = Partition.open(a, "t", 0, LogConfig(segment_bytes=512 * 1024), 1, ManualClock(1_000_000), gc, offload=io)
    dirs.place(("t", 0))
    part.become_leader(Assignment((1,), frozenset({1}), 1, 0, 0))
    for _ in range(250):
        part.append(make_batch(8, value_size=1000), AppendOrigin.CLIENT)
    size = sum(f.stat().st_size for f in (a / "t-0").glob("*.log"))
    done = asyncio.Event()
    ReplicaMove(part, dirs.dirs[1], dirs, OS_FS, io, gc, lambda: 1_000_000, lambda m: done.set(),
                lambda d, why: None, throttle)
    await asyncio.wait_for(done.wait(), 60)
    assert part.directory == b / "t-0" and dirs.locate(("t", 0)) is dirs.dirs[1]
    part.close()
    gc.close()
    io.close()
    return size, part


async def test_a_throttled_move_copies_no_faster_than_the_rate(tmp_path: Path) -> None:
    """replica.alter.log.dirs.io.max.bytes.per.second: the copy of about 2 MB under 256 KiB/s
    waits, in the simulated time of its sleeps, at least what the bytes past the first step take
    at that rate — and little more."""
    rate = 256 * 1024
    t = SimulatedTime()
    size, _ = await move_once(tmp_path / "slow", MoveThrottle(rate, t.clock, t.sleep))
    waited = sum(t.waits)
    assert size > 2_000_000
    assert waited >= (size - rate) / rate, (waited, size / rate)
    assert waited <= size / rate + 1
    assert t.clock.monotonic() - 1_000 >= (size - rate) / rate  # the clock the quota reads moved as much
