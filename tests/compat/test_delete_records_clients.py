"""Real admin clients deleting records and describing log dirs on Ketch: confluent-kafka's
AdminClient.delete_records (librdkafka has no DescribeLogDirs), kafka-python's
KafkaAdminClient.delete_records and describe_log_dirs, and aiokafka's delete_records. A consumer
of each library then starts at the new log start."""

from __future__ import annotations

import os
import warnings
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.errors import OffsetOutOfRangeError
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from helpers import BrokerProcess, unique_topic
from helpers.confluent import QUIET, admin, create_topic, wait_visible

with warnings.catch_warnings():  # kafka-python loads its schemas with a deprecated importlib API
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import KafkaAdminClient

pytestmark = pytest.mark.compat

PER_PARTITION = 20


def _fill(bootstrap: str, topic: str, partitions: int) -> None:
    """PER_PARTITION records in each partition, at offsets 0..PER_PARTITION-1."""
    create_topic(bootstrap, topic, partitions)
    p = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for i in range(PER_PARTITION * partitions):
        p.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def _earliest(bootstrap: str, topic: str, partition: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", **QUIET})
    try:
        low, _high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        c.close()
    return int(low)


def _kp_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)


# ---- confluent-kafka (librdkafka) ----------------------------------------------------------------

def test_confluent_delete_records(module_broker: BrokerProcess) -> None:
    bs, t = module_broker.bootstrap, unique_topic("cf-dr")
    _fill(bs, t, 2)
    client = admin(bs)
    futs = client.delete_records([TopicPartition(t, 0, 7), TopicPartition(t, 1, OFFSET_END)], request_timeout=30)
    got = {tp.partition: f.result(30).low_watermark for tp, f in futs.items()}
    assert got == {0: 7, 1: PER_PARTITION}
    assert _earliest(bs, t, 0) == 7 and _earliest(bs, t, 1) == PER_PARTITION

    (fut,) = client.delete_records([TopicPartition(t, 0, PER_PARTITION + 1)], request_timeout=30).values()
    with pytest.raises(KafkaException) as exc:
        fut.result(30)
    err: KafkaError = exc.value.args[0]
    assert err.code() == KafkaError.OFFSET_OUT_OF_RANGE

    compacted = unique_topic("cf-dr-compact")
    client.create_topics([NewTopic(compacted, 1, 1, config={"cleanup.policy": "compact"})])[compacted].result(30)
    wait_visible(bs, compacted, 1)
    (fut,) = client.delete_records([TopicPartition(compacted, 0, 0)], request_timeout=30).values()
    with pytest.raises(KafkaException) as exc:
        fut.result(30)
    assert exc.value.args[0].code() == KafkaError.POLICY_VIOLATION


# ---- kafka-python ------------------------------------------------------------------------------------

def test_kafka_python_delete_records_and_consume_from_the_new_start(module_broker: BrokerProcess) -> None:
    bs, t = module_broker.bootstrap, unique_topic("kp-dr")
    _fill(bs, t, 2)
    client = _kp_admin(bs)
    try:
        got = client.delete_records({KpTopicPartition(t, 0): 12, KpTopicPartition(t, 1): -1})
        assert {tp.partition: r["low_watermark"] for tp, r in got.items()} == {0: 12, 1: PER_PARTITION}
        with pytest.raises(kafka.errors.OffsetOutOfRangeError):
            client.delete_records({KpTopicPartition(t, 0): PER_PARTITION + 5})
    finally:
        client.close()

    consumer = KafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    try:
        tp = KpTopicPartition(t, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        offsets = []
        for msg in consumer:
            offsets.append(msg.offset)
            if msg.offset == PER_PARTITION - 1:
                break
        assert offsets == list(range(12, PER_PARTITION))
    finally:
        consumer.close()


@pytest.mark.single_broker
def test_kafka_python_describe_log_dirs(module_broker: BrokerProcess) -> None:
    bs, t = module_broker.bootstrap, unique_topic("kp-ld")
    _fill(bs, t, 2)
    client = _kp_admin(bs)
    try:
        (broker_dirs,) = client.describe_log_dirs({t: [0, 1]})
        everything = client.describe_log_dirs()
    finally:
        client.close()
    (log_dir,) = broker_dirs["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == os.path.abspath(module_broker.data_dir)
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
    (topic,) = log_dir["topics"]
    parts: dict[int, dict[str, Any]] = {p["partition_index"]: p for p in topic["partitions"]}
    assert topic["name"] == t and set(parts) == {0, 1}
    assert all(p["partition_size"] > 0 and p["offset_lag"] == 0 for p in parts.values())
    (all_dirs,) = everything[0]["log_dirs"]
    assert t in {x["name"] for x in all_dirs["topics"]}


# ---- aiokafka ----------------------------------------------------------------------------------------

async def test_aiokafka_delete_records(module_broker: BrokerProcess) -> None:
    bs, t = module_broker.bootstrap, unique_topic("aio-dr")
    _fill(bs, t, 1)
    client = AIOKafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=30_000)
    await client.start()
    try:
        tp = AioTopicPartition(t, 0)
        assert await client.delete_records({tp: RecordsToDelete(before_offset=15)}) == {tp: 15}
        with pytest.raises(OffsetOutOfRangeError):
            await client.delete_records({tp: RecordsToDelete(before_offset=PER_PARTITION + 1)})
    finally:
        await client.close()
    consumer = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        batches = await consumer.getmany(tp, timeout_ms=10_000, max_records=PER_PARTITION)
        assert [m.offset for m in batches[tp]] == list(range(15, PER_PARTITION))
    finally:
        await consumer.stop()
