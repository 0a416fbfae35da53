"""Which topics a consumer group's members subscribe to, read from their JoinGroup metadata.

OffsetDelete must refuse to drop the committed offset of a topic the group still consumes (the
next commit would bring it back, or worse, a restart would reset the position). Only the
"consumer" protocol type has a known metadata layout, ConsumerProtocolSubscription: int16 version,
then in every version the v0 fields first — topics (int32 count, int16-length strings) and user
data (int32-length bytes, -1 null). Like Kafka, we read that v0 prefix of any version.
"""

from __future__ import annotations

from collections.abc import Iterable

import structlog

from protocol.primitives import DecodeError, Reader

log = structlog.get_logger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscription_topics(metadata: bytes) -> list[str]:
    """The topics of one member's subscription. Raises ValueError for bytes that are not one."""
    r = Reader(metadata)
    version = r.int16()
    if version < 0:
        raise DecodeError(f"subscription version {version}")
    n = r.int32()
    if n < 0 or n * 2 > r.remaining():
        raise DecodeError(f"subscription with {n} topics in {r.remaining()} bytes")
    topics = []
    for _ in range(n):
        name = r.string()
        if name is None:
            raise DecodeError("null topic name in a subscription")
        topics.append(name)
    r.bytes_()  # user data: read so that a truncated subscription is refused as Kafka refuses it
    return topics


def subscribed_topics(group_id: str, protocol_type: str | None, protocol_name: str | None,
                      metadata: Iterable[bytes]) -> frozenset[str] | None:
    """The union of the members' subscriptions, or None when it cannot be known: not the consumer
    protocol, no protocol chosen yet, or metadata that does not parse. An empty group of the
    consumer protocol subscribes to nothing (an empty set, not None)."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    members = list(metadata)
    if not members:
        return frozenset()
    if protocol_name is None:
        return None
    topics: set[str] = set()
    try:
        for m in members:
            topics.update(subscription_topics(m))
    except ValueError as e:  # DecodeError, or a name that is not UTF-8
        log.warning("cannot read the consumer protocol subscriptions; treating every topic as subscribed",
                    group=group_id, protocol=protocol_name, error=str(e))
        return None
    return frozenset(topics)
