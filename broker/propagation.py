"""Waiting until every live broker has applied a topic change this broker made.

Brokers apply the metadata log each at its own moment, a few milliseconds apart. CreateTopics and
CreatePartitions answer only once the change is in every live broker's image: a client that goes
on at once to another broker — the new partition's leader for ListOffsets, any broker for its
Metadata — would otherwise be told the topic does not exist (UNKNOWN_TOPIC_OR_PARTITION, which
some clients, kafka-python's admin among them, take as final) or not see it in the list of all
topics. DeleteTopics likewise answers once no live broker lists the topic any more: a client
recreating it at once, or producing to it through another broker, would otherwise still find the
old one there. The other brokers are asked with Metadata over their inter-broker listener, on a
channel of its own.

A broker lists a new partition as soon as it applies the change, but its leader opens the log on
its log directory's I/O thread (broker/log_io.py) and answers NOT_LEADER_OR_FOLLOWER until then.
So a creation also waits until each partition's leader answers ListOffsets for it: a client that
writes to the leader the moment CreateTopics answers finds the log there. (Kafka's brokers make
the replica in the step that applies the change; ours take a few milliseconds more per log.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import structlog

from protocol.clock import Clock
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse

from .metadata.image import MetadataImage
from .wire import Channel, WireError, WireSecurity

log = structlog.get_logger()

POLL_S = 0.005  # between two asks of a broker that has not applied the change yet
LATEST = -1  # ListOffsets' timestamp for the log end
Key = tuple[str, int]


class Propagation:
    def __init__(self, node_id: int, image: Callable[[], MetadataImage],
                 address_of: Callable[[int], tuple[str, int] | None], clock: Clock,
                 leads_here: Callable[[str, int], bool], security: WireSecurity | None = None) -> None:
        self._node_id = node_id
        self._leads_here = leads_here  # this broker leads the partition with its log open
        self._clock = clock
        self._image = image
        self._channel = Channel(address_of, f"ketch-metadata-{node_id}", security)

    async def everywhere(self, partitions: Mapping[str, int], timeout_s: float) -> list[int]:
        """Until every other live broker lists each topic with at least its number of partitions,
        and none lists a topic given 0 (deleted), then until the leader of each partition of the
        topics not deleted has its log open; returns the brokers that did not within `timeout_s`
        (a broker fenced meanwhile is not waited for)."""
        deadline = self._clock.monotonic() + timeout_s
        pending = await self._listed(partitions, deadline)
        created = {name: n for name, n in partitions.items() if n > 0}
        if created and not pending:
            pending = await self._led(created, deadline)
        return pending

    async def _listed(self, partitions: Mapping[str, int], deadline: float) -> list[int]:
        request = MetadataRequest(topics=[MetadataRequestTopic(name=n) for n in partitions],
                                  allow_auto_topic_creation=False)
        pending = self._others()
        while pending:
            shown = await asyncio.gather(*(self._shows(b, request, partitions, deadline) for b in pending))
            pending = [b for b, ok in zip(pending, shown, strict=True) if not ok and b in self._others()]
            if not pending or self._clock.monotonic() >= deadline:
                break
            await asyncio.sleep(POLL_S)
        if pending:
            log.warning("topic change not yet applied by every live broker when answered", brokers=pending,
                        topics=sorted(partitions))
        return pending

    async def _led(self, partitions: Mapping[str, int], deadline: float) -> list[int]:
        """Until each partition's leader, as this broker's image names it at each round, answers
        ListOffsets for it; returns the leaders still not answering at `deadline`."""
        waiting: set[Key] = {(name, i) for name, n in partitions.items() for i in range(n)}
        while True:
            by_leader: dict[int, list[Key]] = {}
            image = self._image()
            live = set(image.live_brokers())
            for name, i in sorted(waiting):
                info = image.topics.get(name)
                leader = info.partitions[i].leader if info is not None and i < len(info.partitions) else -1
                if leader not in live:  # deleted, or its leader fenced meanwhile: not waited for
                    waiting.discard((name, i))
                    continue
                by_leader.setdefault(leader, []).append((name, i))
            here = by_leader.pop(self._node_id, [])
            waiting -= {k for k in here if self._leads_here(*k)}
            answered = await asyncio.gather(*(self._answers(b, keys, deadline) for b, keys in by_leader.items()))
            for keys in answered:
                waiting -= keys
            if not waiting or self._clock.monotonic() >= deadline:
                break
            await asyncio.sleep(POLL_S)
        leaders = sorted({b for b, keys in by_leader.items() if waiting.intersection(keys)} |
                         ({self._node_id} if waiting.intersection(here) else set()))
        if waiting:
            log.warning("new partitions' logs not yet open on their leaders when answered", brokers=leaders,
                        topics=sorted(partitions))
        return leaders

    async def _answers(self, broker: int, keys: list[Key], deadline: float) -> set[Key]:
        """The partitions `broker` answers ListOffsets for without an error: it leads them and
        their logs are open."""
        left = deadline - self._clock.monotonic()
        if left <= 0:
            return set()
        by_topic: dict[str, list[int]] = {}
        for name, i in keys:
            by_topic.setdefault(name, []).append(i)
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=0, topics=[
            ListOffsetsTopic(name=name, partitions=[ListOffsetsPartition(partition_index=i, timestamp=LATEST)
                                                    for i in indexes])
            for name, indexes in by_topic.items()])
        try:
            conn = await asyncio.wait_for(self._channel.connection(broker), left)
            resp = await conn.request(request, timeout=left)
        except (WireError, OSError, TimeoutError):
            return set()
        assert isinstance(resp, ListOffsetsResponse)
        return {(t.name, p.partition_index) for t in resp.topics for p in t.partitions if p.error_code == 0}

    def close(self) -> None:
        self._channel.close()

    def _others(self) -> list[int]:
        return [b for b in self._image().live_brokers() if b != self._node_id]

    async def _shows(self, broker: int, request: MetadataRequest, partitions: Mapping[str, int],
                     deadline: float) -> bool:
        left = deadline - self._clock.monotonic()
        if left <= 0:
            return False
        try:
            conn = await asyncio.wait_for(self._channel.connection(broker), left)
            resp = await conn.request(request, timeout=left)
        except (WireError, OSError, TimeoutError):
            return False
        assert isinstance(resp, MetadataResponse)
        listed = {t.name: len(t.partitions) for t in resp.topics if t.error_code == 0}
        return all(name not in listed if n == 0 else listed.get(name, 0) >= n for name, n in partitions.items())
