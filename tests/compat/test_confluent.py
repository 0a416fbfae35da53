"""confluent-kafka (librdkafka 2.x) against a real Ketch broker: admin, produce, consume round trips."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from helpers import BrokerProcess, make_messages, unique_topic, verify_round_trip, wait_until
from helpers.confluent import admin, consume_all, create_topic, produce, topic_partition_count

pytestmark = pytest.mark.compat

PARTITIONS = 6
N = 10_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def test_admin_create_topic_shows_in_metadata(module_broker: BrokerProcess) -> None:
    name = unique_topic("cf-admin")
    create_topic(module_broker.bootstrap, name, PARTITIONS)
    md = admin(module_broker.bootstrap).list_topics(timeout=10)
    assert name in md.topics, f"{name} missing from full metadata listing {sorted(md.topics)}"
    parts = md.topics[name].partitions
    assert sorted(parts) == list(range(PARTITIONS))
    broker_ids = set(md.brokers)
    assert all(p.leader in broker_ids for p in parts.values()), "every partition needs a known leader"
    advertised = {(b.host, b.port) for b in md.brokers.values()}
    assert (module_broker.host, module_broker.port) in advertised, f"advertised brokers: {advertised}"


def test_admin_create_existing_topic_fails(module_broker: BrokerProcess) -> None:
    name = unique_topic("cf-dup")
    create_topic(module_broker.bootstrap, name, 2)
    client = admin(module_broker.bootstrap)
    fut = client.create_topics([NewTopic(name, 3, -1)], request_timeout=15)[name]
    with pytest.raises(KafkaException) as info:
        fut.result(20)
    assert info.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert topic_partition_count(module_broker.bootstrap, name) == 2, "the failed create must not alter it"


@pytest.mark.parametrize("idempotence", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(module_broker: BrokerProcess, codec: str, idempotence: bool) -> None:
    name = unique_topic(f"cf-{codec}-{idempotence}")
    create_topic(module_broker.bootstrap, name, PARTITIONS)
    msgs = make_messages(N, seed=CODECS.index(codec) * 2 + idempotence)
    acks = produce(
        module_broker.bootstrap,
        name,
        msgs,
        {"compression.type": codec, "enable.idempotence": idempotence, "linger.ms": 5},
    )
    # librdkafka's consumer default is isolation.level=read_committed: the LSO path.
    consumed = consume_all(module_broker.bootstrap, name, PARTITIONS)
    verify_round_trip(msgs, consumed, partitions=PARTITIONS, acks=acks)
    assert len({p for p, _ in acks.values()}) == PARTITIONS, "10,000 keyed messages should use all partitions"


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_isolation_levels_see_all_non_transactional_data(
    module_broker: BrokerProcess, isolation: str
) -> None:
    name = unique_topic(f"cf-iso-{isolation}")
    create_topic(module_broker.bootstrap, name, PARTITIONS)
    msgs = make_messages(2_000, seed=7)
    acks = produce(module_broker.bootstrap, name, msgs, {"enable.idempotence": True})
    consumed = consume_all(module_broker.bootstrap, name, PARTITIONS, {"isolation.level": isolation})
    verify_round_trip(msgs, consumed, partitions=PARTITIONS, acks=acks)


def test_null_key_and_null_value_round_trip(module_broker: BrokerProcess) -> None:
    """A record with no key and a tombstone (null value) keep their nulls, distinct from empty bytes."""
    name = unique_topic("cf-nulls")
    create_topic(module_broker.bootstrap, name, 1)
    p = Producer({"bootstrap.servers": module_broker.bootstrap, "acks": "all", "log_level": 3})
    p.produce(name, key=None, value=b"no-key", partition=0)
    p.produce(name, key=b"tomb", value=None, partition=0)
    p.produce(name, key=b"", value=b"", partition=0)
    assert p.flush(30) == 0
    got = [(r.offset, r.key, r.value) for r in consume_all(module_broker.bootstrap, name, 1)]
    assert sorted(got) == [(0, None, b"no-key"), (1, b"tomb", None), (2, b"", b"")]


def test_headers_round_trip(module_broker: BrokerProcess) -> None:
    name = unique_topic("cf-headers")
    create_topic(module_broker.bootstrap, name, 1)
    headers = [("a", b"1"), ("b", b"\x00\xff"), ("a", b"dup"), ("empty", b""), ("null", None)]
    produce(module_broker.bootstrap, name, make_messages(1), {"linger.ms": 0})  # offset 0: no headers
    p = Producer({"bootstrap.servers": module_broker.bootstrap, "acks": "all", "log_level": 3})
    p.produce(name, key=b"k", value=b"v", partition=0, headers=headers)
    assert p.flush(30) == 0
    c = Consumer(
        {
            "bootstrap.servers": module_broker.bootstrap,
            "group.id": "hdr",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    try:
        c.assign([TopicPartition(name, 0, 1)])
        box: list = []

        def got_one() -> bool:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                box.append(m)
            return bool(box)

        wait_until(got_one, timeout=30, interval=0, message="the record with headers")
        m = box[0]
        assert (m.offset(), m.key(), m.value()) == (1, b"k", b"v")
        assert m.headers() == headers
    finally:
        c.close()
