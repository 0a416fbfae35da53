"""Choosing a partition: murmur2 for keyed messages, sticky for unkeyed ones.

Keyed: `(murmur2(key) & 0x7fffffff) % partitions`, bit for bit what Java's default partitioner
(and librdkafka's "murmur2_random", kafka-python, aiokafka) computes, so a key lands on the same
partition whichever of those clients wrote it. Stream joins and compacted topics depend on that.

Unkeyed (KIP-480): stick to one random partition until a batch for it is sent, then pick another.
Batches fill up instead of every partition getting a tiny batch per linger period.
"""

from __future__ import annotations

import random

# murmur2's multiplier and seed (also used by client/arrow.py's column-wise murmur2)
MURMUR2_M = 0x5BD1E995
MURMUR2_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (Utils.murmur2 in Java) as a signed 32-bit int."""
    length = len(data)
    h = (MURMUR2_SEED ^ length) & _MASK
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * MURMUR2_M) & _MASK
        k ^= k >> 24
        k = (k * MURMUR2_M) & _MASK
        h = (h * MURMUR2_M) & _MASK
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * MURMUR2_M) & _MASK
    h ^= h >> 13
    h = (h * MURMUR2_M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class DefaultPartitioner:
    """murmur2 for keys, sticky random for null keys."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._sticky: dict[str, int] = {}
        self._rng = rng or random.Random(random.getrandbits(64))  # noqa: S311 - one random.seed() fixes it (the simulation)

    def partition(self, topic: str, key: bytes | None, num_partitions: int,
                  available: list[int] | None = None) -> int:
        if key is not None:
            return partition_for_key(key, num_partitions)
        p = self._sticky.get(topic)
        if p is None or p >= num_partitions:
            p = self._pick(num_partitions, available, None)
            self._sticky[topic] = p
        return p

    def batch_done(self, topic: str, partition: int, num_partitions: int,
                   available: list[int] | None = None) -> None:
        """A batch for the sticky partition was closed: move unkeyed traffic elsewhere."""
        if self._sticky.get(topic) == partition:
            self._sticky[topic] = self._pick(num_partitions, available, partition)

    def _pick(self, n: int, available: list[int] | None, avoid: int | None) -> int:
        choices = available if available else list(range(n))
        if len(choices) > 1 and avoid is not None:
            choices = [c for c in choices if c != avoid]
        return self._rng.choice(choices)
