"""fsync internal-topic appends before they are acted on, one fsync per log per loop turn.

A transaction coordinator must not answer EndTxn before its PrepareCommit is on disk, nor write
CompleteCommit before the markers are: after a power loss the outcome would differ between the
coordinator and the partitions. With one replica nothing but the disk can vouch for an append
(with followers, the ISR takes that role, as in Kafka). Fsyncing each append on its own would put
one fsync on every transaction step; instead every log appended to in one event-loop turn is
flushed once, at the end of the turn, and all its waiters released together (group commit).
"""

from __future__ import annotations

import asyncio

from storage.log import PartitionLog


class GroupCommit:
    def __init__(self) -> None:
        self._pending: dict[int, tuple[PartitionLog, list[asyncio.Future[None]]]] = {}
        self._scheduled = False
        self.fsyncs = 0  # flushes done, for metrics and tests
        self.waiters = 0  # syncs asked for

    def sync(self, log: PartitionLog) -> asyncio.Future[None]:
        """A future done once everything appended to `log` so far is on disk."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._pending.setdefault(id(log), (log, []))[1].append(fut)
        self.waiters += 1
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return fut

    def _flush(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, {}
        for log, futs in pending.values():
            error: BaseException | None = None
            try:
                log.flush()
                self.fsyncs += 1
            except Exception as e:  # a closed log (deleted topic) or a failing disk: tell every waiter
                error = e
            for f in futs:
                if f.done():
                    continue
                if error is None:
                    f.set_result(None)
                else:
                    f.set_exception(error)
