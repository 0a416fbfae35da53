"""SIGKILL the broker at each step of the commit protocol; after restart the transaction must end
committed everywhere — data partitions, consumer offsets, the coordinator — and nothing may be
left hanging.

The broker kills itself at the chosen point (KETCH_TEST_CRASH_AT, test-only, storage/faults.py):
    after_prepare       PrepareCommit logged, no marker sent
    after_some_markers  one partition has its commit marker, the others not
    before_complete     every marker written, CompleteCommit not
PrepareCommit is durable in all three, so the only correct outcome is a commit.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from helpers import BrokerProcess, unique_topic, wait_until
from helpers.confluent import QUIET, consume_all, create_topic
from helpers.txn import RawTxn

PARTITIONS = 3


@pytest.mark.parametrize("point", ["after_prepare", "after_some_markers", "before_complete"])
def test_commit_survives_a_crash_at_every_step(broker_factory, point: str) -> None:  # type: ignore[no-untyped-def]
    b: BrokerProcess = broker_factory(env={"KETCH_TEST_CRASH_AT": point})
    bs = b.bootstrap
    data, src = unique_topic("crash-data"), unique_topic("crash-src")
    create_topic(bs, data, PARTITIONS)
    create_topic(bs, src, 1)
    group = f"crash-{uuid.uuid4().hex[:8]}"
    tid = f"crash-{uuid.uuid4().hex[:8]}"

    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False, **QUIET})
    producer = Producer({"bootstrap.servers": bs, "transactional.id": tid, "linger.ms": 5, **QUIET})
    producer.init_transactions(30)
    producer.begin_transaction()
    values = [f"v{i}".encode() for i in range(9)]
    for i, v in enumerate(values):
        producer.produce(data, value=v, partition=i % PARTITIONS)
    producer.send_offsets_to_transaction([TopicPartition(src, 0, 42)], consumer.consumer_group_metadata(), 30)
    try:
        producer.commit_transaction(10)  # answered before the markers: may succeed, may not
    except KafkaException:
        pass
    wait_until(lambda: not b.is_running(), timeout=20, message=f"broker to kill itself at {point}")
    assert f"KETCH_TEST_CRASH_AT={point}" in b.log_text()
    del producer
    consumer.close()

    b.kill()  # reap the dead process
    b.env = {}
    b.start()
    raw = RawTxn(b.port)
    try:
        wait_until(lambda: raw.describe(tid).transaction_state == "CompleteCommit", timeout=30,
                   message="the recovered coordinator to finish the commit")
        assert "resending markers of a transaction found prepared" in b.log_text()  # recovery did it
        for p in range(PARTITIONS):
            assert raw.latest(data, p, committed=True) == raw.latest(data, p, committed=False)
            assert all(s.current_txn_start_offset == -1 for s in raw.producers(data, p)), "hanging on data"
        assert raw.list_txns(states=["Ongoing", "PrepareCommit", "PrepareAbort"]).transaction_states == []
        offsets_part = [s for s in range(50)
                        if any(x.current_txn_start_offset >= 0 for x in raw.producers("__consumer_offsets", s))]
        assert offsets_part == [], f"open transaction left in __consumer_offsets {offsets_part}"
    finally:
        raw.close()
    got = consume_all(bs, data, PARTITIONS, {"isolation.level": "read_committed"}, check_watermarks=False)
    assert sorted(r.value for r in got) == sorted(values)
    checker = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed", **QUIET})
    try:
        wait_until(lambda: checker.committed([TopicPartition(src, 0)], timeout=10)[0].offset == 42, timeout=30,
                   message="the transaction's consumer offset")
    finally:
        checker.close()
    # The transactional id is usable again.
    again = Producer({"bootstrap.servers": bs, "transactional.id": tid, **QUIET})
    again.init_transactions(30)
    again.begin_transaction()
    again.produce(data, value=b"next", partition=0)
    again.commit_transaction(30)
