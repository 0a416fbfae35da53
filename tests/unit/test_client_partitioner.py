"""murmur2 and the default partitioner: keys must land where Java / librdkafka / kafka-python put them."""

from __future__ import annotations

import random

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from client.partitioner import DefaultPartitioner, murmur2, partition_for_key

# Kafka's own test vectors (UtilsTest.testMurmur2 in the Java client).
JAVA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), JAVA_VECTORS)
def test_murmur2_matches_java(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_matches_kafka_python_on_random_keys() -> None:
    rnd = random.Random(7)
    for n in list(range(0, 40)) + [127, 128, 1000]:
        for _ in range(20):
            key = rnd.randbytes(n)
            theirs = kafka_python_murmur2(key)  # unsigned 32-bit
            assert murmur2(key) & 0xFFFFFFFF == theirs, key


def test_partition_for_key_uses_positive_hash_modulo() -> None:
    # Java: Utils.toPositive(murmur2(key)) % numPartitions
    for key, h in JAVA_VECTORS:
        for n in (1, 3, 6, 7, 100):
            assert partition_for_key(key, n) == (h & 0x7FFFFFFF) % n


def test_keyed_partitioning_is_stable_and_unkeyed_is_sticky_until_batch_done() -> None:
    p = DefaultPartitioner(random.Random(1))
    assert p.partition("t", b"k", 6) == p.partition("t", b"k", 6) == partition_for_key(b"k", 6)
    first = p.partition("t", None, 6)
    assert all(p.partition("t", None, 6) == first for _ in range(100))
    p.batch_done("t", first, 6)
    second = p.partition("t", None, 6)
    assert second != first
    p.batch_done("t", first, 6)  # a batch of another partition closing does not move us
    assert p.partition("t", None, 6) == second
