"""Replication on this broker: what its partitions' roles ask of the network.

The metadata image makes a partition led or followed here (TopicTable's listeners); a followed
partition is fetched from its leader (fetcher.py), a led one hears its followers through their
fetches (broker/apis/fetch.py). What a leader decides on its own about its ISR — a follower caught
up, one fallen behind replica.lag.time.max.ms — becomes an AlterPartition to the active
controller; the controller's answer settles the pending change, and the committed change comes
back through the image like every other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import structlog

from protocol.errors import ErrorCode, KafkaError

from ..partition.replica_state import Assignment, IsrChange
from .fetcher import ReplicaFetcher

if TYPE_CHECKING:
    from ..partition import Partition
    from ..topics import TopicTable

log = structlog.get_logger()

# (partition, change) -> (error, the partition's state as the controller committed it)
AlterPartition = Callable[["Partition", IsrChange], Awaitable[tuple[ErrorCode, Assignment | None]]]


class ReplicaManager:
    def __init__(self, topics: TopicTable, fetcher: ReplicaFetcher, alter_partition: AlterPartition,
                 lag_time_max_ms: int) -> None:
        self.topics = topics
        self.fetcher = fetcher
        self._alter = alter_partition
        self.check_interval_s = max(lag_time_max_ms / 2000, 0.1)
        self._tasks: dict[asyncio.Task[None], None] = {}
        self._checker: asyncio.Task[None] | None = None
        topics.listeners.append(self.on_partition)

    def on_partition(self, topic: str, part: Partition, leads: bool) -> None:
        if leads or part.closed:  # a replica deleted, moved away or offline is fetched no more
            self.fetcher.unfollow(part)
        else:
            self.fetcher.follow(part)

    def start(self) -> None:
        self._checker = asyncio.get_running_loop().create_task(self._check_loop())
        for t in self.topics.by_name.values():  # partitions the image gave us before the loop ran
            for p in t.partitions:
                if not p.is_leader:
                    self.fetcher.follow(p)

    async def stop(self) -> None:
        if self._checker is not None:
            self._checker.cancel()
        for t in list(self._tasks):
            t.cancel()
        await self.fetcher.stop()

    def request_isr_change(self, part: Partition, change: IsrChange) -> None:
        task = asyncio.get_running_loop().create_task(self._send(part, change))
        self._tasks[task] = None
        task.add_done_callback(lambda done: self._tasks.pop(done, None))

    async def _send(self, part: Partition, change: IsrChange) -> None:
        try:
            code, committed = await self._alter(part, change)
        except KafkaError as e:
            code, committed = e.code, None
        except Exception as e:  # the connection to the controller: try again at the next check
            log.info("AlterPartition failed", topic=part.topic, partition=part.index, error=str(e))
            code, committed = ErrorCode.REQUEST_TIMED_OUT, None
        if code:
            log.info("ISR change not accepted", topic=part.topic, partition=part.index, isr=sorted(change.new_isr),
                     error=ErrorCode(code).name)
        else:
            log.info("ISR changed", topic=part.topic, partition=part.index, isr=sorted(change.new_isr))
        part.on_isr_change_result(change, ErrorCode(code), committed)

    async def _check_loop(self) -> None:
        while True:
            await asyncio.sleep(self.check_interval_s)
            for t in list(self.topics.by_name.values()):
                for p in t.partitions:
                    if p.is_leader:
                        change = p.isr_shrink()
                        if change is not None:
                            self.request_isr_change(p, change)
