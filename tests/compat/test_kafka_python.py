"""kafka-python (pure-Python, blocking client) against a real Ketch broker."""

from __future__ import annotations

import time
import warnings

import pytest
from helpers import BrokerProcess, Consumed, Msg, make_messages, unique_topic, verify_round_trip, wait_until

with warnings.catch_warnings():  # kafka-python loads its schemas with a deprecated importlib API
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient

pytestmark = pytest.mark.compat

PARTITIONS = 6
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
COUNT = {"none": 10_000, "gzip": 2_000, "snappy": 2_000, "lz4": 2_000, "zstd": 2_000}


def test_codec_libraries_importable() -> None:
    """kafka-python needs python-snappy, lz4 and zstandard (the dev extra); missing ones are a failure."""
    assert kafka.codec.has_snappy(), "python-snappy missing"
    assert kafka.codec.has_lz4(), "lz4 missing"
    assert kafka.codec.has_zstd(), "zstandard missing"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        # raises on any per-topic error; waits until every partition has a leader in metadata
        admin.create_topics(
            {topic: {"num_partitions": partitions, "replication_factor": -1}}, wait_for_metadata=True
        )
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, msgs: list[Msg], **conf: object) -> dict[int, tuple[int, int]]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_block_ms=30_000, **conf
    )
    try:
        futs = [producer.send(topic, key=m.key, value=m.value) for m in msgs]
        producer.flush(timeout=90)
        metas = [f.get(timeout=10) for f in futs]
        return {m.idx: (md.partition, md.offset) for m, md in zip(msgs, metas, strict=True)}
    finally:
        producer.close(timeout=10)


def consume_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list[Consumed]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,  # manual assignment, nothing committed, no group protocol
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation,
    )
    try:
        parts = wait_until(
            lambda: consumer.partitions_for_topic(topic), timeout=20, message=f"metadata for {topic}"
        )
        assert parts == set(range(PARTITIONS)), f"consumer metadata partitions for {topic}: {parts}"
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        out: list[Consumed] = []
        deadline = time.monotonic() + 90
        while any(consumer.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, f"only {len(out)} records consumed before the deadline"
            for tp, recs in consumer.poll(timeout_ms=500, max_records=5000).items():
                out += [Consumed(tp.partition, r.offset, r.key, r.value) for r in recs]
        return out
    finally:
        consumer.close(autocommit=False)


@pytest.mark.parametrize("idempotence", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(module_broker: BrokerProcess, codec: str, idempotence: bool) -> None:
    name = unique_topic(f"kp-{codec}-{idempotence}")
    create_topic(module_broker.bootstrap, name, PARTITIONS)
    msgs = make_messages(COUNT[codec], seed=CODECS.index(codec) * 2 + idempotence)
    acks = produce(
        module_broker.bootstrap,
        name,
        msgs,
        compression_type=None if codec == "none" else codec,
        enable_idempotence=idempotence,
    )
    consumed = consume_all(module_broker.bootstrap, name)
    verify_round_trip(msgs, consumed, partitions=PARTITIONS, acks=acks)


def test_read_committed_consumer(module_broker: BrokerProcess) -> None:
    name = unique_topic("kp-read-committed")
    create_topic(module_broker.bootstrap, name, PARTITIONS)
    msgs = make_messages(2_000, seed=98)
    acks = produce(module_broker.bootstrap, name, msgs, enable_idempotence=True)
    consumed = consume_all(module_broker.bootstrap, name, isolation="read_committed")
    verify_round_trip(msgs, consumed, partitions=PARTITIONS, acks=acks)
