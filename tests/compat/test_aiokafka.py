"""aiokafka (pure-Python asyncio client) against a real Ketch broker."""

from __future__ import annotations

import asyncio
import time

import aiokafka.codec
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from helpers import BrokerProcess, Consumed, Msg, make_messages, unique_topic, verify_round_trip
from helpers.compat_mode import REPLICATION_FACTOR

pytestmark = pytest.mark.compat

PARTITIONS = 6
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
# Pure-Python clients are slow: the full 10,000 for uncompressed, a smaller batch for each codec.
COUNT = {"none": 10_000, "gzip": 2_000, "snappy": 2_000, "lz4": 2_000, "zstd": 2_000}


def test_codec_libraries_importable() -> None:
    """A missing codec library is a broken dev install, not a reason to skip (pip install -e '.[dev]')."""
    assert aiokafka.codec.has_snappy() and aiokafka.codec.has_lz4() and aiokafka.codec.has_zstd()


async def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    await admin.start()
    try:
        resp = await admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=REPLICATION_FACTOR)])
        errors = [(t[0], t[1]) for t in resp.topic_errors if t[1] != 0]
        assert not errors, f"CreateTopics errors: {errors}"
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, msgs: list[Msg], **conf: object) -> dict[int, tuple[int, int]]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, **conf)
    await producer.start()
    try:
        futs = [await producer.send(topic, key=m.key, value=m.value) for m in msgs]
        metas = await asyncio.wait_for(asyncio.gather(*futs), timeout=90)
        return {m.idx: (md.partition, md.offset) for m, md in zip(msgs, metas, strict=True)}
    finally:
        await producer.stop()


async def consume_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list[Consumed]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,  # no consumer group protocol: manual assignment, nothing committed
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation,
    )
    await consumer.start()
    try:
        parts = consumer.partitions_for_topic(topic)
        if not parts:
            await consumer._client.force_metadata_update()  # noqa: SLF001 - freshly created topic
            parts = consumer.partitions_for_topic(topic)
        assert parts == set(range(PARTITIONS)), f"consumer metadata partitions for {topic}: {parts}"
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        out: list[Consumed] = []
        deadline = time.monotonic() + 90

        async def behind() -> bool:
            return any([await consumer.position(tp) < end[tp] for tp in tps])

        while await behind():
            assert time.monotonic() < deadline, f"only {len(out)} records consumed before the deadline"
            batches = await consumer.getmany(timeout_ms=500, max_records=5000)
            for tp, recs in batches.items():
                out += [Consumed(tp.partition, r.offset, r.key, r.value) for r in recs]
        return out
    finally:
        await consumer.stop()


@pytest.mark.parametrize("idempotence", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
async def test_round_trip(module_broker: BrokerProcess, codec: str, idempotence: bool) -> None:
    name = unique_topic(f"aio-{codec}-{idempotence}")
    await create_topic(module_broker.bootstrap, name, PARTITIONS)
    msgs = make_messages(COUNT[codec], seed=CODECS.index(codec) * 2 + idempotence)
    acks = await produce(
        module_broker.bootstrap,
        name,
        msgs,
        compression_type=None if codec == "none" else codec,
        enable_idempotence=idempotence,
    )
    consumed = await consume_all(module_broker.bootstrap, name)
    verify_round_trip(msgs, consumed, partitions=PARTITIONS, acks=acks)


async def test_read_committed_consumer(module_broker: BrokerProcess) -> None:
    name = unique_topic("aio-read-committed")
    await create_topic(module_broker.bootstrap, name, PARTITIONS)
    msgs = make_messages(2_000, seed=99)
    acks = await produce(module_broker.bootstrap, name, msgs, enable_idempotence=True)
    consumed = await consume_all(module_broker.bootstrap, name, isolation="read_committed")
    verify_round_trip(msgs, consumed, partitions=PARTITIONS, acks=acks)
