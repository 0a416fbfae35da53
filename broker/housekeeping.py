"""Timed log housekeeping: recovery-point checkpoints, producer expiry, retention, compaction.

Compaction reads and rewrites whole segments, seconds of work on a large partition. Run on the
event loop it would stall every request for that long, and once followers fetch from this broker
a stalled leader shrinks its ISR. So only the quick decisions and the swap run on the loop
(storage.cleaner.prepare / install); the pass itself runs in a worker thread
(storage.cleaner.run), which touches no live log state. Passes run one at a time. Retention
likewise only takes segments out of the log on the loop (a rename to *.deleted); unlinking their
files, which can take long for large files on some filesystems, happens in a worker thread.
Checkpoints too are only taken on the loop (the values, a producer snapshot's bytes) and written
(several fsyncs each) on the I/O thread of the log's directory (broker/log_io.py); a log whose flush_ms passed
without appends is flushed on group commit's thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from protocol.clock import Clock

from .log_io import LogIO
from .partition import Partition
from .topics import TopicTable

log = structlog.get_logger(__name__)


class Housekeeper:
    def __init__(self, topics: TopicTable, clock: Clock, retention_check_interval_ms: int,
                 checkpoint_interval_ms: int, producer_expiration_check_interval_ms: int, *,
                 io_of: Callable[[Partition], LogIO]) -> None:
        self.topics = topics
        self.clock = clock
        self.io_of = io_of  # the I/O thread of a partition's log directory writes its checkpoints
        self.retention_interval_s = retention_check_interval_ms / 1000
        self.checkpoint_interval_s = checkpoint_interval_ms / 1000
        self.expiry_interval_s = producer_expiration_check_interval_ms / 1000

    async def run(self) -> None:
        """Checkpoint recovery points (so a restart after a crash re-reads only what came since,
        as Kafka does every minute); forget idle producers (else every producer that ever wrote
        stays in memory and in snapshots for the life of the process); apply retention and
        compaction every retention interval."""
        now = self.clock.monotonic
        next_retention = now() + self.retention_interval_s
        next_expiry = now() + self.expiry_interval_s
        while True:
            await asyncio.sleep(min(self.retention_interval_s, self.checkpoint_interval_s, self.expiry_interval_s))
            retention_due = now() >= next_retention
            if retention_due:
                next_retention = now() + self.retention_interval_s
            expiry_due = now() >= next_expiry
            if expiry_due:
                next_expiry = now() + self.expiry_interval_s
            for t in list(self.topics.by_name.values()):
                for p in list(t.partitions):
                    try:
                        await self.tidy(p, retention_due=retention_due, expiry_due=expiry_due)
                    except OSError as e:  # the disk: its log directory goes offline
                        log.error("housekeeping failed", topic=t.name, partition=p.index, exc_info=e)
                        if p.on_storage_error is not None and not p.closed:
                            p.on_storage_error(p, e)
                    except Exception as e:
                        log.error("housekeeping failed", topic=t.name, partition=p.index, exc_info=e)
                    # Taking a checkpoint encodes the producer snapshot on the loop: with many
                    # partitions, let the loop turn between them.
                    await asyncio.sleep(0)

    async def tidy(self, p: Partition, *, retention_due: bool, expiry_due: bool) -> None:
        """One partition's share of a pass (Partition.maintain)."""
        await p.maintain(self.clock.now_ms(), self.io_of(p).run, retention=retention_due, expiry=expiry_due)
