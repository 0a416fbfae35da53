"""Exactly-once transactions with kafka-python (3.x has a transactional producer) against Ketch."""

from __future__ import annotations

import time
import uuid
from collections import Counter

import pytest
from helpers import BrokerProcess, unique_topic
from helpers.confluent import consume_all, create_topic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

pytestmark = pytest.mark.compat

PARTITIONS = 3


def _producer(bootstrap: str, tid: str) -> KafkaProducer:
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, linger_ms=5)
    p.init_transactions()
    return p


def _values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Read back with kafka-python itself, to the end offsets (the LSO at read_committed)."""
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation,
        consumer_timeout_ms=3000,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        out: list[bytes] = []
        deadline = time.monotonic() + 60
        while any(c.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, f"read {len(out)} values, positions stuck before {end}"
            for recs in c.poll(timeout_ms=500).values():
                out += [r.value for r in recs]
        return out
    finally:
        c.close()


def test_committed_visible_aborted_never_across_topics(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topics = [unique_topic(f"kp-txn-{i}") for i in range(3)]
    for t in topics:
        create_topic(bs, t, PARTITIONS)
    p = _producer(bs, f"kp-vis-{uuid.uuid4().hex[:8]}")
    committed: list[bytes] = []
    aborted: list[bytes] = []
    try:
        for txn in range(6):
            p.begin_transaction()
            values = [f"t{txn}-m{i}".encode() for i in range(27)]
            futs = [
                p.send(topics[i % 3], value=v, partition=(i // 3) % PARTITIONS) for i, v in enumerate(values)
            ]
            p.flush()
            for f in futs:
                f.get(timeout=30)
            if txn % 3 == 2:
                p.abort_transaction()
                aborted += values
            else:
                p.commit_transaction()
                committed += values
    finally:
        p.close()
    rc: list[bytes] = []
    ru: list[bytes] = []
    for t in topics:
        rc += _values(bs, t, "read_committed")
        ru += _values(bs, t, "read_uncommitted")
    assert Counter(rc) == Counter(committed)
    assert Counter(ru) == Counter(committed + aborted)


def test_send_offsets_to_transaction_commits_with_the_data(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    src, dst = unique_topic("kp-ctp-in"), unique_topic("kp-ctp-out")
    create_topic(bs, src, 1)
    create_topic(bs, dst, 1)
    group = f"kp-ctp-{uuid.uuid4().hex[:8]}"
    p = _producer(bs, f"kp-ctp-{uuid.uuid4().hex[:8]}")
    try:
        p.begin_transaction()
        p.send(dst, value=b"aborted", partition=0)
        p.send_offsets_to_transaction({TopicPartition(src, 0): OffsetAndMetadata(7, "", -1)}, group)
        p.abort_transaction()
        p.begin_transaction()
        p.send(dst, value=b"committed", partition=0)
        p.send_offsets_to_transaction({TopicPartition(src, 0): OffsetAndMetadata(5, "", -1)}, group)
        p.commit_transaction()
    finally:
        p.close()
    c = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    try:
        assert c.committed(TopicPartition(src, 0)) == 5
    finally:
        c.close()
    got = consume_all(bs, dst, 1, {"isolation.level": "read_committed"}, check_watermarks=False)
    assert [r.value for r in got] == [b"committed"]


def test_second_producer_fences_the_first(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("kp-fence")
    create_topic(bs, topic, PARTITIONS)
    tid = f"kp-fence-{uuid.uuid4().hex[:8]}"
    p1 = _producer(bs, tid)
    p1.begin_transaction()
    p1.send(topic, value=b"zombie", partition=0).get(timeout=30)
    p2 = _producer(bs, tid)
    try:
        with pytest.raises(KafkaError) as err:
            p1.send(topic, value=b"zombie-2", partition=1).get(timeout=30)
            p1.commit_transaction()
        text = repr(err.value).lower()
        assert "fenced" in text or "epoch" in text, text
        p2.begin_transaction()
        p2.send(topic, value=b"real", partition=2)
        p2.commit_transaction()
    finally:
        p1.close(timeout=5)
        p2.close()
    assert _values(bs, topic, "read_committed") == [b"real"]
