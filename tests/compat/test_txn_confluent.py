"""Exactly-once transactions with confluent-kafka (librdkafka) against a real Ketch broker."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import uuid
from collections import Counter

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from helpers import BrokerProcess, unique_topic, wait_until
from helpers.confluent import QUIET, consume_all, create_topic
from helpers.txn import RawTxn

pytestmark = pytest.mark.compat

TOPICS = 3
PARTITIONS = 3


def _producer(bootstrap: str, tid: str, **conf: object) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **QUIET, **conf})
    p.init_transactions(30)
    return p


def _values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    got = consume_all(bootstrap, topic, PARTITIONS, {"isolation.level": isolation}, check_watermarks=False)
    return [r.value for r in got if r.value is not None]


def test_committed_visible_aborted_never_across_topics(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topics = [unique_topic(f"txn-vis-{i}") for i in range(TOPICS)]
    for t in topics:
        create_topic(bs, t, PARTITIONS)
    p = _producer(bs, f"vis-{uuid.uuid4().hex[:8]}")
    committed: list[bytes] = []
    aborted: list[bytes] = []
    for txn in range(12):
        p.begin_transaction()
        values = []
        for i in range(45):
            v = f"txn{txn}-m{i}".encode()
            p.produce(topics[i % TOPICS], value=v, partition=(i // TOPICS) % PARTITIONS)
            values.append(v)
        if txn % 3 == 1:
            p.flush(30)  # the aborted data really is in the logs, not just dropped client-side
            p.abort_transaction(30)
            aborted.extend(values)
        else:
            p.commit_transaction(30)
            committed.extend(values)
    read_committed: list[bytes] = []
    read_uncommitted: list[bytes] = []
    for t in topics:
        read_committed += _values(bs, t, "read_committed")
        read_uncommitted += _values(bs, t, "read_uncommitted")
    assert Counter(read_committed) == Counter(committed)
    assert Counter(read_uncommitted) == Counter(committed + aborted)
    assert not set(read_committed) & set(aborted)


@pytest.mark.single_broker
def test_read_committed_consumer_waits_at_the_open_transaction(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("txn-block")
    create_topic(bs, topic, 1)
    txp = _producer(bs, f"block-{uuid.uuid4().hex[:8]}")
    txp.begin_transaction()
    for i in range(5):
        txp.produce(topic, value=f"txn-{i}".encode(), partition=0)
    assert txp.flush(30) == 0
    plain = Producer({"bootstrap.servers": bs, **QUIET})
    plain.produce(topic, value=b"after", partition=0)
    assert plain.flush(30) == 0

    raw = RawTxn(module_broker.port)
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            **QUIET,
        }
    )
    try:
        assert raw.latest(topic, 0, committed=True) == 0 and raw.latest(topic, 0, committed=False) == 6
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        # Several fetch rounds come back empty: nothing below the LSO, and "after" is above it.
        assert [m for m in c.consume(100, 1.5) if m.error() is None] == []
        txp.commit_transaction(30)
        got: list[bytes] = []

        def drained() -> bool:
            got.extend(m.value() for m in c.consume(100, 0.2) if m.error() is None)
            return len(got) >= 6

        wait_until(drained, timeout=20, message="committed transaction and later data")
        assert got == [f"txn-{i}".encode() for i in range(5)] + [b"after"]
    finally:
        c.close()
        raw.close()


def test_consume_transform_produce_is_exactly_once_with_random_aborts(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    src, dst = unique_topic("txn-ctp-in"), unique_topic("txn-ctp-out")
    create_topic(bs, src, PARTITIONS)
    create_topic(bs, dst, PARTITIONS)
    n = 600
    feeder = Producer({"bootstrap.servers": bs, **QUIET})
    for i in range(n):
        feeder.produce(src, value=f"in-{i}".encode(), partition=i % PARTITIONS)
    assert feeder.flush(30) == 0

    group = f"ctp-{uuid.uuid4().hex[:8]}"
    rng = random.Random(7)
    consumer = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 50,
            **QUIET,
        }
    )
    producer = _producer(bs, f"ctp-{uuid.uuid4().hex[:8]}")
    parts = [TopicPartition(src, p) for p in range(PARTITIONS)]
    consumer.assign([TopicPartition(src, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    commits = aborts = 0
    try:

        def all_committed() -> bool:
            done = consumer.committed(parts, timeout=10)
            return sum(max(tp.offset, 0) for tp in done) == n

        while not all_committed():
            msgs = [m for m in consumer.consume(rng.randint(1, 60), 0.5) if m.error() is None]
            if not msgs:
                continue
            producer.begin_transaction()
            for m in msgs:
                producer.produce(dst, value=b"out-" + m.value(), partition=m.partition())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
            )
            if rng.random() < 1 / 3:
                # librdkafka purges unsent messages on abort: flush first so the aborted copies
                # really reach the log (the read_uncommitted check below relies on it).
                assert producer.flush(30) == 0
                producer.abort_transaction(30)
                aborts += 1
                # Start again from what the group has committed (the aborted offsets never were).
                for tp in consumer.committed(parts, timeout=10):
                    consumer.seek(
                        TopicPartition(src, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                    )
            else:
                producer.commit_transaction(30)
                commits += 1
            assert commits + aborts < 500, "no progress"
        assert aborts > 0 and commits > 0
        out = _values(bs, dst, "read_committed")
        assert Counter(out) == Counter(f"out-in-{i}".encode() for i in range(n))
        assert len(_values(bs, dst, "read_uncommitted")) > n  # the aborted copies are in the log
    finally:
        consumer.close()


def test_second_producer_fences_the_first(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("txn-fence")
    create_topic(bs, topic, PARTITIONS)
    tid = f"fence-{uuid.uuid4().hex[:8]}"
    p1 = _producer(bs, tid)
    p1.begin_transaction()
    p1.produce(topic, value=b"zombie", partition=0)
    assert p1.flush(30) == 0
    p2 = _producer(bs, tid)  # aborts p1's open transaction and takes over
    with pytest.raises(KafkaException) as err:
        p1.produce(topic, value=b"zombie-2", partition=1)
        p1.commit_transaction(30)
    e: KafkaError = err.value.args[0]
    assert e.fatal() and e.code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    )
    p2.begin_transaction()
    p2.produce(topic, value=b"real", partition=2)
    p2.commit_transaction(30)
    assert _values(bs, topic, "read_committed") == [b"real"]


PRODUCE_AND_HANG = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2],
                  "transaction.timeout.ms": 2000, "log_level": 0})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(sys.argv[3], value=b"lost-%d" % i, partition=0)
    assert p.flush(30) == 0
    print("ready", flush=True)
    time.sleep(600)
""")


def test_producer_that_disappears_is_aborted_after_its_timeout(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b: BrokerProcess = broker_factory(env={"KETCH_TRANSACTION_ABORT_TIMED_OUT_INTERVAL_MS": "100"})
    topic = unique_topic("txn-gone")
    create_topic(b.bootstrap, topic, 1)
    proc = subprocess.Popen(
        [sys.executable, "-c", PRODUCE_AND_HANG, b.bootstrap, f"gone-{uuid.uuid4().hex[:8]}", topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.kill()  # the producer vanishes mid-transaction; nothing aborts it client-side
    finally:
        proc.kill()
        proc.wait(10)
    plain = Producer({"bootstrap.servers": b.bootstrap, **QUIET})
    plain.produce(topic, value=b"after", partition=0)
    assert plain.flush(30) == 0
    # The read_committed consumer gets past the abandoned transaction once the coordinator aborted it.
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 100,
            **QUIET,
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        found: list[bytes] = []

        def moved_on() -> bool:
            found.extend(m.value() for m in c.consume(10, 0.2) if m.error() is None)
            return bool(found)

        wait_until(
            moved_on, timeout=20, message="read_committed consumer to move past the abandoned transaction"
        )
    finally:
        c.close()
    assert found == [b"after"]
    raw = RawTxn(b.port)
    try:
        assert (
            raw.latest(topic, 0, committed=True) == raw.latest(topic, 0, committed=False) == 12
        )  # 10 + marker + 1
    finally:
        raw.close()
