"""The "consumer" embedded protocol of classic groups (Kafka's ConsumerProtocolSubscription and
ConsumerProtocolAssignment), read and written by the coordinator only where a group changes protocol
with members in it (KIP-848's online upgrade and downgrade, migration.py): a classic member's
subscription and owned partitions become a consumer-group member's, and a consumer group's
assignment is handed to classic members in SyncGroup.

Neither struct is flexible. Subscription: int16 version, topics (int32 count of int16 strings), user
data (int32-length bytes, -1 null), from v1 owned partitions (topic, int32 partitions), from v2 the
generation (int32), from v3 the rack (nullable string). Assignment: int16 version, assigned
partitions (topic, int32 partitions), user data.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.primitives import DecodeError, Reader, Writer


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: tuple[tuple[str, int], ...] = ()
    rack: str | None = None


def _name(r: Reader) -> str:
    s = r.string()
    if s is None:
        raise DecodeError("null topic name")
    return s


def _topic_partitions(r: Reader) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for _ in range(max(r.int32(), 0)):
        topic = _name(r)
        out.extend((topic, r.int32()) for _ in range(max(r.int32(), 0)))
    return out


def parse_subscription(data: bytes) -> Subscription:
    """Raises ValueError (DecodeError) for bytes that are not a subscription."""
    r = Reader(data)
    version = r.int16()
    if version < 0:
        raise DecodeError(f"subscription version {version}")
    topics = tuple(_name(r) for _ in range(max(r.int32(), 0)))
    r.bytes_()
    owned = tuple(_topic_partitions(r)) if version >= 1 else ()
    if version >= 2:
        r.int32()
    rack = r.string() if version >= 3 else None
    return Subscription(version, topics, owned, rack)


def parse_assignment(data: bytes) -> list[tuple[str, int]]:
    """The partitions of an assignment; an empty one (b"": nothing assigned yet) is none."""
    if not data:
        return []
    r = Reader(data)
    if r.int16() < 0:
        raise DecodeError("assignment with a negative version")
    return _topic_partitions(r)


def encode_assignment(partitions: list[tuple[str, int]], version: int) -> bytes:
    """At the version of the member's own subscription, as Kafka writes it for a classic member."""
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(partitions):
        by_topic.setdefault(t, []).append(p)
    w = Writer()
    w.int16(max(version, 0))
    w.int32(len(by_topic))
    for t, ps in by_topic.items():
        w.string(t)
        w.int32(len(ps))
        for p in ps:
            w.int32(p)
    w.bytes_(None)
    return w.getvalue()
