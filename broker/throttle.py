"""How much a follower may fetch for throttled replicas (Kafka's follower.replication.throttled.rate
with follower.replication.throttled.replicas), without I/O: the fetcher asks, then reports.

A reassignment copies whole partitions to their new replicas; unthrottled, that copy competes
with clients for the leader's disk and network. A throttled replica is one a reassignment is
adding to this broker, or one the topic lists in `follower.replication.throttled.replicas`
(`*` or `partition:broker` pairs, as the reassignment tool writes them). All throttled replicas of
a broker share one quota of `follower_replication_throttled_rate` bytes per second: a token bucket
holding at most one second's worth. While it is empty they are left out of fetches (the others go
on as usual) until it refills — as Kafka's quota manager holds throttled partitions back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .metadata.image import MetadataImage


def throttled(image: MetadataImage, node: int, topic: str, partition: int) -> bool:
    """Whether this broker's replica is throttled: one a reassignment is adding here, or one its
    topic lists in follower.replication.throttled.replicas."""
    info = image.topics.get(topic)
    if info is None or partition >= len(info.partitions):
        return False
    if node in info.partitions[partition].adding:
        return True
    value = info.configs.get("follower.replication.throttled.replicas", "")
    return bool(value) and listed(value, partition, node)


def listed(value: str, partition: int, node: int) -> bool:
    """Whether a `*.replication.throttled.replicas` value names this replica."""
    items = [p.strip() for p in value.split(",") if p.strip()]
    if items == ["*"]:
        return True
    return f"{partition}:{node}" in {"".join(i.split()) for i in items}


class ByteRateQuota:
    def __init__(self, bytes_per_s: int, now_s: float, *, start_full: bool = True) -> None:
        """`start_full`: the first second's worth may go at once (else nothing goes before it accrues)."""
        if bytes_per_s <= 0:
            raise ValueError("a quota needs a positive rate")
        self.rate = bytes_per_s
        self._tokens = float(bytes_per_s) if start_full else 0.0
        self._at = now_s

    def _refill(self, now_s: float) -> None:
        self._tokens = min(float(self.rate), self._tokens + (now_s - self._at) * self.rate)
        self._at = now_s

    def available(self, now_s: float) -> bool:
        self._refill(now_s)
        return self._tokens > 0

    def record(self, nbytes: int, now_s: float) -> None:
        """Bytes fetched for throttled replicas; the bucket may go below zero (a fetch is not
        cut short), which then holds them back for longer."""
        self._refill(now_s)
        self._tokens -= nbytes

    def wait_s(self, now_s: float) -> float:
        """How long until throttled replicas may fetch again (0: now)."""
        self._refill(now_s)
        return 0.0 if self._tokens > 0 else (1 - self._tokens) / self.rate
