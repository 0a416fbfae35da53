"""Make internal-topic appends durable before they are acted on, one fsync per log at a time, on
an I/O thread.

A transaction coordinator must not answer EndTxn before its PrepareCommit is on disk, nor write
CompleteCommit before the markers are: after a power loss the outcome would differ between the
coordinator and the partitions. With one replica nothing but the disk can vouch for an append
(with followers, the ISR takes that role, as in Kafka). Fsyncing each append on its own would put
one fsync on every transaction step; instead the logs asked for are synced together, and while
that runs the next requests gather for the sync after it (group commit).

The syncs run on a thread per log directory: an fsync can take seconds when the disk is busy, and
on the event loop it would stall every connection, lease and heartbeat of the broker with it (the
chaos campaigns saw three brokers stalled together for 15 s); on one thread for all directories a
hung disk would hold every other disk's logs, a coordinator's among them. Only the data files are synced (see
storage.log.DataSync); the indexes and the recovery point follow the log's flush policy, whose
flushes (`flush`) go through the same machinery: a LogFlush instead of a DataSync, grouped the
same way, recorded back on the loop with end_flush.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from storage.log import DataSync, LogFlush, PartitionLog

_Job = tuple[PartitionLog, DataSync | LogFlush | None, list[asyncio.Future[None]]]
_Pending = dict[int, tuple[PartitionLog, list[asyncio.Future[None]], bool]]  # id(log) -> (log, waiters, a flush asked)


def _run(jobs: list[DataSync | LogFlush | None]) -> list[BaseException | None]:
    """On the I/O thread: every sync, each failing on its own."""
    errors: list[BaseException | None] = []
    for job in jobs:
        try:
            if job is not None:
                job.run()
            errors.append(None)
        except Exception as e:  # a failing disk: tell that log's waiters
            errors.append(e)
    return errors


class GroupCommit:
    def __init__(self) -> None:
        self._pending: dict[Path | None, _Pending] = {}  # by log directory
        self._running: set[Path | None] = set()  # directories whose sync is under way
        self._ios: dict[Path | None, ThreadPoolExecutor] = {}
        self.fsyncs = 0  # log syncs done, for metrics and tests
        self.waiters = 0  # syncs asked for
        self.on_error: Callable[[PartitionLog, BaseException], None] | None = None  # a sync that failed

    def sync(self, log: PartitionLog) -> asyncio.Future[None]:
        """A future done once everything appended to `log` so far is on disk."""
        return self._ask(log, flush=False)

    def flush(self, log: PartitionLog) -> asyncio.Future[None]:
        """A future done once `log` is flushed as its flush policy wants (data, indexes and the
        directory on disk, the recovery point moved): storage.log.LogFlush."""
        return self._ask(log, flush=True)

    def flush_later(self, log: PartitionLog) -> asyncio.Future[None] | None:
        """`flush`, for a flush nobody waits on (the segments a roll closed); None where no event
        loop runs (a tool, a synchronous test, driving a log without one): the log's next flush or
        its close takes care of them then."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return None
        return self.flush(log)

    def _ask(self, log: PartitionLog, *, flush: bool) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._add(log, [fut], flush)
        self.waiters += 1
        return fut

    def _add(self, log: PartitionLog, futs: list[asyncio.Future[None]], flush: bool) -> None:
        d = _log_dir(log)
        pending = self._pending.setdefault(d, {})
        _, waiting, flushing = pending.get(id(log), (log, [], False))
        pending[id(log)] = (log, waiting + futs, flushing or flush)
        if d not in self._running:
            self._running.add(d)
            asyncio.get_running_loop().call_soon(self._start, d)  # the rest of this loop turn's appends join this sync

    def replace(self, old: PartitionLog, new: PartitionLog) -> None:
        """`new` took `old`'s place, holding all of it (a replica moved to another log directory):
        syncs asked of `old` and not begun run on `new` instead (`old` is closed)."""
        entry = self._pending.get(_log_dir(old), {}).pop(id(old), None)
        if entry is not None:
            _, futs, flush = entry
            self._add(new, futs, flush)

    def _start(self, d: Path | None) -> None:
        pending = self._pending.pop(d, {})
        jobs: list[_Job] = []
        for log, futs, flush in pending.values():
            try:
                jobs.append((log, log.begin_flush() if flush else log.begin_sync(), futs))
            except Exception as e:  # a closed log (deleted topic)
                _settle(futs, e)
        asyncio.get_running_loop().create_task(self._sync(d, jobs))

    async def _sync(self, d: Path | None, jobs: list[_Job]) -> None:
        loop = asyncio.get_running_loop()
        io = self._ios.get(d)
        if io is None:
            io = self._ios[d] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ketch-sync")
        try:
            errors = await loop.run_in_executor(io, _run, [job for _, job, _ in jobs])
            for (log, job, futs), error in zip(jobs, errors, strict=True):
                if job is not None and error is None:
                    if isinstance(job, LogFlush):
                        log.end_flush(job)
                    else:
                        log.end_sync(job)
                    self.fsyncs += 1
                if error is not None and job is not None and self.on_error is not None:
                    self.on_error(log, error)
                _settle(futs, error)
        except BaseException as e:  # cancelled at shutdown: nobody may be left believing it synced
            for _, _, futs in jobs:
                _settle(futs, e if isinstance(e, Exception) else RuntimeError("broker stopping"))
            raise
        finally:
            if self._pending.get(d):
                loop.call_soon(self._start, d)
            else:
                self._pending.pop(d, None)
                self._running.discard(d)

    def close(self) -> None:
        for io in self._ios.values():
            io.shutdown(wait=True)


def _log_dir(log: PartitionLog) -> Path | None:
    """The log directory holding `log` (its partition directory's parent), whose thread syncs it."""
    return log.directory.parent if log.directory is not None else None


def _settle(futs: list[asyncio.Future[None]], error: BaseException | None) -> None:
    for f in futs:
        if f.done():
            continue
        if error is None:
            f.set_result(None)
        else:
            f.set_exception(error)
