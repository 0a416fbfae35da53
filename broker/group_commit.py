"""Make internal-topic appends durable before they are acted on, one fsync per log at a time, on
an I/O thread.

A transaction coordinator must not answer EndTxn before its PrepareCommit is on disk, nor write
CompleteCommit before the markers are: after a power loss the outcome would differ between the
coordinator and the partitions. With one replica nothing but the disk can vouch for an append
(with followers, the ISR takes that role, as in Kafka). Fsyncing each append on its own would put
one fsync on every transaction step; instead the logs asked for are synced together, and while
that runs the next requests gather for the sync after it (group commit).

The sync runs on a thread of its own: an fsync can take seconds when the disk is busy, and on the
event loop it would stall every connection, lease and heartbeat of the broker with it (the chaos
campaigns saw three brokers stalled together for 15 s). Only the data files are synced (see
storage.log.DataSync); the indexes and the recovery point follow the log's flush policy, whose
flushes (`flush`) go through the same machinery: a LogFlush instead of a DataSync, grouped the
same way, recorded back on the loop with end_flush.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from storage.log import DataSync, LogFlush, PartitionLog

_Job = tuple[PartitionLog, DataSync | LogFlush | None, list[asyncio.Future[None]]]


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
        # id(log) -> (log, waiters, a flush (not only a data sync) asked for)
        self._pending: dict[int, tuple[PartitionLog, list[asyncio.Future[None]], bool]] = {}
        self._running = False
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ketch-sync")
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

    def _ask(self, log: PartitionLog, *, flush: bool) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        _, futs, flushing = self._pending.get(id(log), (log, [], False))
        futs.append(fut)
        self._pending[id(log)] = (log, futs, flushing or flush)
        self.waiters += 1
        if not self._running:
            self._running = True
            loop.call_soon(self._start)  # the rest of this loop turn's appends join this sync
        return fut

    def replace(self, old: PartitionLog, new: PartitionLog) -> None:
        """`new` took `old`'s place, holding all of it (a replica moved to another log directory):
        syncs asked of `old` and not begun run on `new` instead (`old` is closed)."""
        entry = self._pending.pop(id(old), None)
        if entry is None:
            return
        _, futs, flush = entry
        _, new_futs, new_flush = self._pending.get(id(new), (new, [], False))
        self._pending[id(new)] = (new, new_futs + futs, new_flush or flush)

    def _start(self) -> None:
        pending, self._pending = self._pending, {}
        jobs: list[_Job] = []
        for log, futs, flush in pending.values():
            try:
                jobs.append((log, log.begin_flush() if flush else log.begin_sync(), futs))
            except Exception as e:  # a closed log (deleted topic)
                _settle(futs, e)
        asyncio.get_running_loop().create_task(self._sync(jobs))

    async def _sync(self, jobs: list[_Job]) -> None:
        loop = asyncio.get_running_loop()
        try:
            errors = await loop.run_in_executor(self._io, _run, [job for _, job, _ in jobs])
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
            if self._pending:
                loop.call_soon(self._start)
            else:
                self._running = False

    def close(self) -> None:
        self._io.shutdown(wait=True)


def _settle(futs: list[asyncio.Future[None]], error: BaseException | None) -> None:
    for f in futs:
        if f.done():
            continue
        if error is None:
            f.set_result(None)
        else:
            f.set_exception(error)
