"""Which partition of an internal topic owns a key: Kafka's rule, bit for bit.

Kafka places a transactional id (and a group id) with `Utils.abs(key.hashCode()) % N`, where
hashCode is Java's String hash over UTF-16 code units and Utils.abs is Math.abs except that
Integer.MIN_VALUE maps to 0. Using the
same rule means a Ketch cluster spreads coordinators the way a Kafka operator expects, and tools
that compute the partition themselves agree with us.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=65536)
def java_string_hash(s: str) -> int:
    """Java's String.hashCode() as a signed 32-bit value (UTF-16 code units, like the JVM).
    Cached: a transactional id or group id is hashed again on every one of its requests, and in
    Python the loop over its characters costs more than the rest of routing the request."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, num_partitions: int) -> int:
    """The internal-topic partition that owns `key`."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
