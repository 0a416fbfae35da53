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
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import structlog

from protocol.clock import Clock
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse

from .metadata.image import MetadataImage
from .wire import Channel, WireError, WireSecurity

log = structlog.get_logger()

POLL_S = 0.005  # between two asks of a broker that has not applied the change yet


class Propagation:
    def __init__(self, node_id: int, image: Callable[[], MetadataImage],
                 address_of: Callable[[int], tuple[str, int] | None], clock: Clock,
                 security: WireSecurity | None = None) -> None:
        self._node_id = node_id
        self._clock = clock
        self._image = image
        self._channel = Channel(address_of, f"ketch-metadata-{node_id}", security)

    async def everywhere(self, partitions: Mapping[str, int], timeout_s: float) -> list[int]:
        """Until every other live broker lists each topic with at least its number of partitions,
        and none lists a topic given 0 (deleted); returns the brokers that did not within
        `timeout_s` (a broker fenced meanwhile is not waited for)."""
        deadline = self._clock.monotonic() + timeout_s
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
