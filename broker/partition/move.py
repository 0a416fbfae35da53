"""Moving a replica to another log directory on a running broker (AlterReplicaLogDirs, 34), as
Kafka's future replicas do: copy, catch up, swap — while the replica keeps taking appends,
serving reads and replicating.

The copy (a "future log") is a PartitionLog of its own in the destination directory, under the
partition's own name `topic-N` but holding FUTURE_MARKER, which says it is not the replica yet.
It is made by `create_future_dir`: built under a `*-delete` name (what a start removes) and
renamed into place once the marker is durable, so an interrupted creation leaves nothing a
start could take for a replica.

`FutureCopy` copies batch by batch, as a follower does (offsets, epochs and producer state come
with the batches), from the current log's start to its end. The current log keeps changing
meanwhile: appends (copied by later steps), truncations (it tells the copy through
`PartitionLog.on_truncate`, and the copy drops what it took beyond the cut), a log start moved by
retention or DeleteRecords (a copy left below it starts over at the new start; `finish` takes the
log start over). A step reads on the event loop (one pread, as a fetch does) and appends to the
future log in a worker thread: nobody else touches the future log until the swap.

The copy steps of every move on the broker share one quota when
replica_alter_log_dirs_io_max_bytes_per_second is set (Kafka's
replica.alter.log.dirs.io.max.bytes.per.second): `MoveThrottle`, a token bucket that starts
empty, so a move of N bytes takes at least N/rate less one step. A replica written to faster than
the rate never catches up, and its move never swaps (as in Kafka) until the rate is raised.

Once caught up, the future log is flushed off the loop, and the catch-up and flush repeat until
little comes in meanwhile. The swap is then one synchronous step on the loop, so no append can
fall between the two logs — Kafka holds the partition's write lock for the same step: copy what
came since the last flush, take the current log's high watermark and log start, fsync that
remainder, then `commit_swap`: rename the current directory to `topic-N.<id>-delete` and fsync
its log directory, then remove the future's marker and fsync its directory. Each step is durable
before the next, so a crash anywhere leaves exactly one replica a start recognises
(broker/log_dirs.py): before the rename the old one, after it the new one (a future whose
partition has no other directory left is the replica). Then the partition takes the new log,
syncs waiting on the old one move to it, and the retired directory is removed off the loop.
Copying and swapping a log is work on the log itself, so this module lives beside Partition,
inside the seal around its log (__init__.py).

A move a stop interrupted before the rename goes on once the partition opens again
(`FutureCopy.resume`): the copy found in the destination is opened (its recovery drops a torn
tail), cut back to where its leader epochs agree with the current log's, and copied on from
there, rather than copied again from the start.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import structlog

from protocol.clock import Clock
from storage.faults import crash_point
from storage.fs import FileSystem
from storage.log import PartitionLog
from storage.offload import Offload

from ..log_dirs import DELETE_SUFFIX, FUTURE_MARKER, LogDir, LogDirs
from ..throttle import ByteRateQuota

if TYPE_CHECKING:
    from ..group_commit import GroupCommit
    from . import Partition

log = structlog.get_logger(__name__)

T = TypeVar("T")

COPY_BYTES = 1 << 20  # read per step
FLUSH_ROUNDS = 5  # catch up and flush at most this often before the swap takes what is left


class MoveThrottle:
    """The broker's one quota for the copies of replica moves (see the module docstring)."""

    def __init__(self, bytes_per_s: int, clock: Clock,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.clock = clock
        self.sleep = sleep
        self.quota = ByteRateQuota(bytes_per_s, clock.monotonic(), start_full=False)
        self.step_bytes = min(COPY_BYTES, bytes_per_s)  # a step no bigger than a second's worth
        self.waited_s = 0.0  # how long copies waited for the quota, all together

    async def take(self, nbytes: int) -> None:
        """Wait until the quota has room, then spend `nbytes` of it."""
        while (wait := self.quota.wait_s(self.clock.monotonic())) > 0:
            self.waited_s += wait
            await self.sleep(wait)
        self.quota.record(nbytes, self.clock.monotonic())


class SourceError(Exception):
    """Reading the current log failed (its disk, not the destination's)."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause))
        self.cause = cause


def disk_error(e: BaseException) -> OSError | None:
    """The I/O error behind `e`: an OSError, or the KAFKA_STORAGE_ERROR a segment raises for one."""
    cause = e if isinstance(e, OSError) else e.__cause__
    return cause if isinstance(cause, OSError) else None


class Chunk(NamedTuple):
    """What one step does to the future log: cut it back, start it over, append batches."""

    truncate_to: int | None
    restart_at: int | None
    data: bytes | memoryview


class FutureCopy:
    """The future log following the current one (sync; see the module docstring)."""

    def __init__(self, current: PartitionLog, future: PartitionLog) -> None:
        if current.on_truncate is not None:
            raise ValueError(f"{current.directory} is already being copied")
        self.current = current
        self.future = future
        self._truncated: int | None = None  # lowest log end a truncation of the current log left
        self._start_over = False  # the next step empties the future log and copies from the start
        current.on_truncate = self._on_truncate

    def _on_truncate(self, log_end: int) -> None:
        self._truncated = log_end if self._truncated is None else min(self._truncated, log_end)

    def resume(self) -> int | None:
        """The future log is a copy a stop interrupted (found at start): keep what of it agrees
        with the current log, as a follower keeps what agrees with its leader — by leader epochs,
        the copy's latest against the current log's history — and copy on from there. The current
        log may have lost a tail the copy holds, or been truncated and written anew under a later
        epoch after the copy took the old batches. Where it resumes; None: it starts over (the
        copy lacks the current log's first batches, or shares no epoch with it)."""
        cur, fut = self.current, self.future
        point: int | None = fut.log_end_offset
        epochs = fut.leader_epochs
        if fut.log_start_offset > self._first_offset():
            point = None
        elif epochs:
            latest = epochs[-1][0]
            epoch, end = cur.end_offset_for_epoch(latest)
            if epoch < 0:
                point = None
            elif epoch != latest:  # the current log never had the copy's latest epoch
                end = min(end, fut.end_offset_for_epoch(epoch)[1])
            if point is not None:
                point = min(point, end, cur.log_end_offset)
        if point is None or point < fut.log_start_offset:
            self._start_over = True
            return None
        self._on_truncate(point)
        return point

    def _first_offset(self) -> int:
        """Where a copy of the current log begins: the batch holding its log start."""
        cur = self.current
        if cur.log_start_offset >= cur.log_end_offset:
            return cur.log_start_offset
        first = cur.read(cur.log_start_offset, 1).first_offset
        return first if first >= 0 else cur.log_start_offset

    def plan(self, max_bytes: int = COPY_BYTES) -> Chunk | None:
        """The next step, read from the current log (on its owner's thread); None when the
        future log holds everything the current one does."""
        cur, fut = self.current, self.future
        end = fut.log_end_offset
        truncate = None
        if self._truncated is not None:
            if self._truncated < end:
                truncate = end = self._truncated
            self._truncated = None
        restart = None
        first = self._first_offset()
        if end < first or self._start_over:  # fresh, left behind by the log start, or not to be kept
            restart = end = first
            self._start_over = False
        at = max(end, cur.log_start_offset)
        if at >= cur.log_end_offset:
            return None if truncate is None and restart is None else Chunk(truncate, restart, b"")
        try:
            data = cur.read(at, max_bytes).data
        except Exception as e:
            if (cause := disk_error(e)) is not None:
                raise SourceError(cause) from e
            raise
        if not data:
            raise RuntimeError(f"nothing readable at {at} below the log end {cur.log_end_offset} of {cur.directory}")
        return Chunk(truncate, restart, data)

    def apply(self, chunk: Chunk) -> None:
        """Carry a step out on the future log (any thread: only the copy touches it)."""
        fut = self.future
        if chunk.truncate_to is not None:
            fut.truncate_to(chunk.truncate_to)
        if chunk.restart_at is not None:
            fut.truncate_fully_and_start_at(chunk.restart_at)
        if chunk.data:
            fut.append(chunk.data, leader_epoch=-1, assign_offsets=False)

    def finish(self) -> None:
        """Copy what is left and take over what is not in the batches (the high watermark, the
        log start, the settings): the future log is then the current one's equal. On the
        current log's thread, with no append between this and the swap."""
        while (chunk := self.plan()) is not None:
            self.apply(chunk)
        cur, fut = self.current, self.future
        fut.update_config(cur.config)
        fut.high_watermark = cur.high_watermark
        if cur.log_start_offset > fut.log_start_offset:
            fut.delete_records_before(cur.log_start_offset)

    def detach(self) -> None:
        if self.current.on_truncate == self._on_truncate:
            self.current.on_truncate = None


def create_future_dir(fs: FileSystem, log_dir: Path, topic: str, index: int) -> Path:
    """The future log's directory `log_dir/topic-N`, marked, made durably (see the module docstring)."""
    final = log_dir / f"{topic}-{index}"
    building = log_dir / f"{topic}-{index}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
    fs.mkdir(building)
    marker = fs.open(building / FUTURE_MARKER, create=True)
    try:
        marker.sync()
    finally:
        marker.close()
    fs.fsync_dir(building)
    fs.rename(building, final)
    fs.fsync_dir(log_dir)
    return final


def commit_swap(fs: FileSystem, current_dir: Path, future_dir: Path, tag: str,
                between: Callable[[], None] | None = None) -> Path:
    """Make the future directory the replica's: retire the current one, then unmark the future
    one, each durable before the next. Returns the retired directory, to remove."""
    retired = current_dir.with_name(f"{current_dir.name}.{tag}{DELETE_SUFFIX}")
    fs.rename(current_dir, retired)
    fs.fsync_dir(current_dir.parent)
    if between is not None:
        between()
    fs.unlink(future_dir / FUTURE_MARKER)
    fs.fsync_dir(future_dir)
    return retired


class ReplicaMove:
    """One move under way: creates the future log, drives the copy, swaps (asyncio shell)."""

    def __init__(self, part: Partition, destination: LogDir, log_dirs: LogDirs, fs: FileSystem, offload: Offload,
                 group_commit: GroupCommit, now_ms: Callable[[], int], on_done: Callable[[ReplicaMove], None],
                 on_disk_error: Callable[[LogDir, str], None], throttle: MoveThrottle | None = None,
                 resume: bool = False) -> None:
        self.part = part
        self.destination = destination
        self.log_dirs = log_dirs
        self.fs = fs
        self.offload = offload
        self.group_commit = group_commit
        self.now_ms = now_ms
        self.on_done = on_done
        self.on_disk_error = on_disk_error  # the destination's disk failed: its directory goes offline
        self.throttle = throttle
        self.resume = resume  # a copy a stop interrupted may be in the destination: go on from it
        self.future: PartitionLog | None = None
        self.copy: FutureCopy | None = None
        self._inflight: asyncio.Future[Any] | None = None
        self.key = (part.topic, part.index)
        log_dirs.moving[self.key] = destination
        self.task = asyncio.get_running_loop().create_task(self._run())

    def cancel(self) -> None:
        """Stop (the replica was removed, or another destination asked for); the task cleans up."""
        if asyncio.current_task() is not self.task:  # else it is ending already
            self.task.cancel()

    async def _off_loop(self, work: Callable[[], T]) -> T:
        """`work` in a worker thread; a cancellation does not leave it running unseen (the
        cleanup waits for it before it closes the files it writes)."""
        fut = asyncio.get_running_loop().run_in_executor(None, work)
        self._inflight = fut
        return await asyncio.shield(fut)

    async def _run(self) -> None:
        part, dest = self.part, self.destination
        current = part._log
        where = f"{part.topic}-{part.index}"
        swapped = False
        try:
            log.info("moving a replica to another log directory", partition=where,
                     source=str(current.directory.parent), destination=str(dest.path))
            future_dir = dest.path / f"{part.topic}-{part.index}"
            found = self.resume and await self._off_loop(lambda: self.fs.exists(future_dir / FUTURE_MARKER))
            if not found:
                await self._off_loop(lambda: create_future_dir(self.fs, dest.path, part.topic, part.index))
            self.future = await self._off_loop(lambda: PartitionLog.open(
                future_dir, current.config, now_ms=self.now_ms, fs=self.fs, offload=self.offload))
            self.copy = FutureCopy(current, self.future)
            if found:
                log.info("replica move resumed", partition=where, destination=str(dest.path),
                         from_offset=self.copy.resume(), copied_up_to=self.future.log_end_offset)
            for _ in range(FLUSH_ROUNDS):
                copied = await self._catch_up(current)
                await self._off_loop(self.future.flush)
                if copied <= 1:
                    break
            self._check(current)
            self._swap(current)
            swapped = True
        except asyncio.CancelledError:
            log.info("replica move stopped", partition=where, destination=str(dest.path))
            raise
        except SourceError as e:
            log.error("replica move failed: reading the replica", partition=where, error=repr(e.cause))
            if part.on_storage_error is not None:
                part.on_storage_error(part, e.cause)
        except Exception as e:
            log.error("replica move failed", partition=where, destination=str(dest.path), error=repr(e))
            if (cause := disk_error(e)) is not None:
                self.on_disk_error(dest, f"moving {where} there: {cause}")
        finally:
            self.log_dirs.moving.pop(self.key, None)
            self.on_done(self)
            if not swapped:  # to the end, even if cancelled meanwhile: a thread may still write to it
                await asyncio.shield(self._discard())

    def _check(self, current: PartitionLog) -> None:
        if self.part._log is not current or current.closed:
            raise RuntimeError("the replica's log was closed or replaced during the move")

    async def _catch_up(self, current: PartitionLog) -> int:
        """Copy until the future log is level with the current one; how many steps it took."""
        copy = self.copy
        assert copy is not None
        steps = 0
        throttle = self.throttle
        while True:
            self._check(current)
            chunk = copy.plan() if throttle is None else copy.plan(throttle.step_bytes)
            if chunk is None:
                return steps
            if throttle is not None and chunk.data:
                await throttle.take(len(chunk.data))
                self._check(current)  # the current log may have moved on meanwhile: this step still applies
            await self._off_loop(functools.partial(copy.apply, chunk))
            steps += 1
            crash_point("move_copying")

    def _swap(self, current: PartitionLog) -> None:
        """The one synchronous step (see the module docstring)."""
        assert self.copy is not None and self.future is not None
        started = time.perf_counter()
        future = self.future
        self.copy.finish()
        future.flush()
        retired: Path | None = None
        try:
            retired = commit_swap(self.fs, current.directory, future.directory, uuid.uuid4().hex,
                                  lambda: crash_point("move_swapping"))
        except OSError as e:
            if self.fs.exists(current.directory):
                raise SourceError(e) from e  # nothing changed on disk: the move fails, the copy is thrown away
            # The current directory is retired already: the future log is the replica (a start
            # would finish the swap the same way), whatever the disk said after.
            log.error("replica move: the swap did not complete on disk; the moved log is the replica",
                      partition=f"{self.part.topic}-{self.part.index}", error=repr(e))
        self.copy.detach()
        self.group_commit.replace(current, future)
        self.part.replace_log(future)
        current.release()
        self.log_dirs.where[self.key] = self.destination
        self.future = None
        log.info("replica moved to another log directory", partition=f"{self.part.topic}-{self.part.index}",
                 log_dir=str(self.destination.path), log_end_offset=future.log_end_offset,
                 swap_ms=round((time.perf_counter() - started) * 1000, 2))
        if retired is not None:
            asyncio.get_running_loop().run_in_executor(None, self.fs.remove_tree, retired)

    async def _discard(self) -> None:
        """Throw the future log away (its directory too, if its disk still answers)."""
        inflight = self._inflight
        if inflight is not None and not inflight.done():
            await asyncio.wait([inflight])
        if (self.future is None and inflight is not None and not inflight.cancelled()
                and inflight.exception() is None and isinstance(inflight.result(), PartitionLog)):
            self.future = inflight.result()  # opened while the move was being stopped
        if self.copy is not None:
            self.copy.detach()
        future, self.future = self.future, None
        if future is not None:
            future.release()
            directory = future.directory
        else:
            directory = self.destination.path / f"{self.part.topic}-{self.part.index}"
        if self.destination.online and self.fs.exists(directory / FUTURE_MARKER):
            await asyncio.get_running_loop().run_in_executor(None, self.fs.remove_tree, directory)
