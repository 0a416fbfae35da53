"""A log directory's I/O thread (one per directory: broker/topics.py): the opening of its
partition logs (creating the directories and files of new ones, recovering existing ones), and
the logs' background writes: checkpoints, producer snapshots and sealed segments' indexes
(storage/offload.py says which, and how they stay in order with what the loop writes itself).

One thread per directory, so the writes of one log run in the order they were taken, and a slow
disk delays only the logs on it; apart from group commit's threads (broker/group_commit.py, also
one per directory), so a burst of checkpoints or of new partitions never delays the fsync a
transaction step waits for. A write that fails is logged and counted: it only costs work after a crash (a
checkpoint or snapshot is a shortcut recovery can do without) — the next checkpoint writes the
newest values again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import structlog

log = structlog.get_logger(__name__)

T = TypeVar("T")


class LogIO:
    """storage.offload.Offload on a thread of its own."""

    def __init__(self) -> None:
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ketch-log-io")
        self.pending = 0  # writes submitted and not done yet
        self.failed = 0

    def submit(self, work: Callable[[], None], then: Callable[[], None]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a log opened or written off the loop (start-up's worker thread)
            work()
            then()
            return
        self.pending += 1
        fut = loop.run_in_executor(self._io, work)
        fut.add_done_callback(lambda f: self._done(f, then))

    def _done(self, fut: asyncio.Future[None], then: Callable[[], None]) -> None:
        self.pending -= 1
        error = fut.exception() if not fut.cancelled() else None
        if error is not None:
            self.failed += 1
            log.error("background log write failed", exc_info=error)
            return
        if not fut.cancelled():
            then()

    async def run(self, work: Callable[[], T]) -> T:
        """`work()` on the I/O thread, after everything submitted before it."""
        self.pending += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._io, work)
        finally:
            self.pending -= 1

    def close(self) -> None:
        """Wait for what is still queued (the logs are closed by then: their writes are dropped)."""
        self._io.shutdown(wait=True)
