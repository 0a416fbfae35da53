"""Broker 1's view of a two-broker cluster, in process: a real TopicTable fed metadata images, for
tests of the coordinators' asyncio shells. Broker 2 is not a process: its fetches are
`Partition.on_follower_fetch` calls (or their absence: a stalled follower still in the ISR), and
what broker 1 copied from it as leader is `replicate`."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from broker.metadata.image import BrokerInfo, MetadataImage, PartitionInfo, TopicInfo
from broker.partition import Partition
from broker.producer_ids import ProducerIdAllocator
from broker.topics import TopicTable
from protocol.records import Record, build_batch

ME, OTHER = 1, 2


class CountingIds(ProducerIdAllocator):
    """Producer ids from 1000 up, without a controller to grant blocks."""

    def __init__(self) -> None:
        super().__init__(ME, lambda: None, lambda: None)
        self._ids = itertools.count(1000)

    def allocate(self) -> int:
        return next(self._ids)


@dataclass
class Cluster:
    topics: TopicTable
    offset: int = 0
    _topics: dict[str, TopicInfo] = field(default_factory=dict)

    async def image(self, name: str, leader: int, leader_epoch: int, configs: Mapping[str, str], *,
                    partitions: int = 1, isr: tuple[int, ...] = (ME, OTHER),
                    replicas: tuple[int, ...] = (ME, OTHER)) -> None:
        """Commit `name` with every partition led by `leader` at `leader_epoch` (replicas 1 and 2
        unless told); returns once the logs it opens here are open (on their I/O threads)."""
        self.offset += 1
        brokers = tuple(BrokerInfo(n, 1, "127.0.0.1", 9000 + n, None, False, 0) for n in (ME, OTHER))
        old = self._topics.get(name)
        parts = tuple(PartitionInfo(replicas, isr, leader, leader_epoch, leader_epoch) for _ in range(partitions))
        self._topics[name] = TopicInfo(name, old.topic_id if old else uuid.uuid4(), parts, dict(configs))
        self.topics.apply_image(MetadataImage(offset=self.offset, brokers=brokers, topics=dict(self._topics)))
        await self.topics.settled()

    def partition(self, name: str, index: int = 0) -> Partition:
        p = self.topics.partition(name, index)
        assert p is not None
        return p

    def close(self) -> None:
        for t in list(self.topics.by_name.values()):
            for p in t.local.values():
                p.close()


def replicate(p: Partition, key: bytes, value: bytes, leader_epoch: int, leader_hw: int) -> None:
    """What broker 1 copies from broker 2 as its leader: one record, and that leader's HW."""
    batch = build_batch([Record(0, 0, key, value)], base_offset=p.log_end_offset, partition_leader_epoch=leader_epoch)
    p.append_replicated(batch, leader_hw, 0)


async def until(cond: Callable[[], object], timeout: float = 10.0, message: str = "condition") -> None:
    """wait.wait_until for a test running on the event loop: the loop keeps turning meanwhile."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, f"timed out after {timeout:.1f}s waiting for {message}"
        await asyncio.sleep(0.01)
