"""Idle producers expire while the broker runs (producer_id_expiration_ms, checked every
producer_id_expiration_check_interval_ms), never one with an open transaction: 10,000 short-lived
idempotent producers leave no state behind, and memory does not keep growing wave after wave."""

from __future__ import annotations

import time

from helpers import BrokerProcess, unique_topic, wait_until
from helpers.txn import RawTxn, txn_batch

from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData

EXPIRATION_S = 2.0
ENV = {"KETCH_PRODUCER_ID_EXPIRATION_MS": str(int(EXPIRATION_S * 1000)),
       "KETCH_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS": "200"}
WAVE = 10_000
WINDOW = 200  # requests in flight on the one connection


def _wave(c: RawTxn, topic: str) -> None:
    """WAVE idempotent producers, each InitProducerId then one batch (pipelined in windows). A
    window's producers are all there right after it: checked on the first window the broker can
    not yet have expired, whatever the machine's speed."""
    judged = False
    for start in range(0, WAVE, WINDOW):
        n = min(WINDOW, WAVE - start)
        ids: list[tuple[int, int]] = []
        deadline = time.monotonic() + 30
        while len(ids) < n:
            # A window can use up the broker's block of producer ids before the next one is
            # granted: COORDINATOR_LOAD_IN_PROGRESS (14), which clients retry, and so does this.
            asked = n - len(ids)
            for _ in range(asked):
                c.send(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), 4)
            for _ in range(asked):
                _, r = c.receive(InitProducerIdRequest, 4)
                assert isinstance(r, InitProducerIdResponse) and r.error_code in (0, 14), r
                if r.error_code == 0:
                    ids.append((r.producer_id, r.producer_epoch))
            assert time.monotonic() < deadline, f"only {len(ids)} of {n} producer ids in 30 s"
        sent = time.monotonic()
        for pid, epoch in ids:
            c.send(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(
                    index=0, records=txn_batch(pid, epoch, 0, transactional=False))])]), 7)
        for _ in range(n):
            _, r = c.receive(ProduceRequest, 7)
            assert isinstance(r, ProduceResponse)
            assert r.responses[0].partition_responses[0].error_code == 0, r
        if not judged:
            live = {p.producer_id for p in c.producers(topic, 0)}
            # Each producer idles from its batch on, which the broker took after `sent`, and is
            # forgotten only once it has idled EXPIRATION_S: if the answer came sooner than that
            # after `sent`, none of the window may be missing. (A busy machine may take longer
            # over a window; then the next one is judged.)
            if time.monotonic() - sent < EXPIRATION_S:
                judged = True
                assert {pid for pid, _ in ids} <= live, f"{len(live)} live producers"
    assert judged, f"no window of {WINDOW} producers was written and described within {EXPIRATION_S} s"


def test_short_lived_producers_expire_and_memory_stops_growing(broker_factory) -> None:
    broker: BrokerProcess = broker_factory(env=ENV)
    topic = unique_topic("expiry")
    c = RawTxn(broker.port)
    c.create_topic(topic, 1)
    # an open transaction's producer must survive every expiry check
    tid = unique_topic("open-txn")
    pid, epoch = c.init_ok(tid)
    assert c.add_partitions(tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
    assert c.produce(topic, 0, txn_batch(pid, epoch, 0), tid)[0] == 0

    rss = []
    for _ in range(3):
        _wave(c, topic)
        wait_until(lambda: [p.producer_id for p in c.producers(topic, 0)] == [pid], timeout=30,
                   message="idle producers to expire, the transactional one to stay")
        rss.append(broker.rss_kib())
    # After the first wave the allocator holds on to what it grew to; later waves reuse it.
    assert rss[2] <= rss[0] * 1.10, rss
    c.close()
