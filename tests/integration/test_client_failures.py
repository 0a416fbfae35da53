"""Failure handling of the bundled client against real broker processes: a broker restart in the
middle of an idempotent produce (nothing lost, nothing duplicated), transactional calls right
after a restart, while the coordinator reloads its state (retried until they succeed), and the
KIP-360 recovery of a producer whose sequences the broker no longer agrees with."""

from __future__ import annotations

import asyncio

import pytest
from helpers import BrokerProcess, unique_topic
from helpers.consume import read_values

from client import (
    Admin,
    BrokerResponseError,
    Consumer,
    KafkaTimeoutError,
    Producer,
    TopicPartition,
    TransactionAbortableError,
)
from protocol.errors import ErrorCode


async def test_broker_restart_during_idempotent_produce_loses_and_duplicates_nothing(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b: BrokerProcess = broker_factory(env={"KETCH_FLUSH_MESSAGES": "1"})
    topic = unique_topic("restart")
    async with Admin(b.bootstrap) as admin:
        await admin.create_topic(topic, 3)
    n = 6_000
    async with Producer(b.bootstrap, linger_ms=2, retry_backoff_ms=50, request_timeout_ms=5_000) as p:
        futs = []
        for i in range(n):
            futs.append(await p.send(topic, b"%06d" % i, key=b"%d" % (i % 50)))
            if i == n // 3:
                await asyncio.sleep(0)  # let some batches go out before the crash
                await asyncio.to_thread(b.restart, kill=True)
        metas = await asyncio.wait_for(asyncio.gather(*futs), 120)
    assert len({(m.partition, m.offset) for m in metas}) == n
    values = await read_values(b.bootstrap, topic, 3)
    assert sorted(values) == [b"%06d" % i for i in range(n)]  # all there, none twice


async def test_transactions_right_after_a_restart_are_retried_until_the_coordinator_is_ready(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b: BrokerProcess = broker_factory(env={"KETCH_FLUSH_MESSAGES": "1"})
    topic = unique_topic("txn-restart")
    tid = unique_topic("tx")
    async with Admin(b.bootstrap) as admin:
        await admin.create_topic(topic, 2)
    async with Producer(b.bootstrap, transactional_id=tid) as p:
        await p.init_transactions()
        async with p.transaction():
            await p.send(topic, b"before")
    b.restart(kill=True)
    # the first requests meet a coordinator that is loading __transaction_state (or not yet
    # elected): COORDINATOR_LOAD_IN_PROGRESS / NOT_AVAILABLE / CONCURRENT_TRANSACTIONS are retried
    async with Producer(b.bootstrap, transactional_id=tid) as p:
        await p.init_transactions()
        async with p.transaction():
            await p.send(topic, b"after")
    assert sorted(await read_values(b.bootstrap, topic, 2, "read_committed")) == [b"after", b"before"]


async def test_idempotent_producer_recovers_from_a_gap_left_by_a_rejected_batch(broker: BrokerProcess) -> None:
    """A batch the broker refuses for good (MESSAGE_TOO_LARGE) leaves a hole in the partition's
    sequences, so the broker answers the next batch OUT_OF_ORDER_SEQUENCE_NUMBER. That is not our
    retry's doing: the producer gets a new producer id (KIP-360) and sends on, from sequence 0,
    with nothing lost and nothing written twice."""
    bs = broker.bootstrap
    topic = unique_topic("gap")
    async with Admin(bs) as admin:
        await admin.create_topic(topic, 3, config={"max.message.bytes": "2000"})
    async with Producer(bs, linger_ms=2, batch_size=1000) as p:
        before = [await p.send(topic, b"a%04d" % i, partition=i % 3) for i in range(300)]
        await p.flush()
        big = await p.send(topic, b"x" * 5000, partition=0)
        await p.flush()
        with pytest.raises(BrokerResponseError) as refused:
            await big
        assert refused.value.code is ErrorCode.MESSAGE_TOO_LARGE
        after = [await p.send(topic, b"b%04d" % i, partition=i % 3) for i in range(3000)]
        await asyncio.wait_for(asyncio.gather(*before, *after), 60)
    sent = [b"a%04d" % i for i in range(300)] + [b"b%04d" % i for i in range(3000)]
    async with Consumer(bs, auto_offset_reset="earliest") as c:
        tp0 = TopicPartition(topic, 0)
        c.assign([tp0])
        end = (await c.end_offsets([tp0]))[tp0]
        p0: list[bytes] = []
        while len(p0) < end:
            p0 += [r.value or b"" for r in (await c.getmany(timeout_ms=1000)).get(tp0, [])]
    assert p0 == sent[0::3]  # partition 0, where the hole was: everything, once, in order
    assert sorted(await read_values(bs, topic, 3)) == sorted(sent)
    async with Admin(bs) as admin:
        producers = await admin.describe_producers(tp0)
    assert len({s.producer_id for s in producers}) == 2  # the first id, and the one it recovered with


async def test_failed_batch_in_a_transaction_is_aborted_and_the_next_transaction_commits(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic = unique_topic("txn-gap")
    async with Admin(bs) as admin:
        await admin.create_topic(topic, 1, config={"max.message.bytes": "2000"})
    async with Producer(bs, transactional_id=unique_topic("tx"), batch_size=1000) as p:
        await p.init_transactions()
        async with p.transaction():
            for i in range(50):
                await p.send(topic, b"one-%d" % i)
        await p.begin_transaction()
        for i in range(10):
            await p.send(topic, b"two-%d" % i)
        await p.flush()
        await p.send(topic, b"x" * 5000)
        with pytest.raises(TransactionAbortableError):
            await p.commit_transaction()
        await p.abort_transaction()
        async with p.transaction():
            for i in range(50):
                await p.send(topic, b"three-%d" % i)
    values = await read_values(bs, topic, 1, "read_committed")
    assert values == [b"one-%d" % i for i in range(50)] + [b"three-%d" % i for i in range(50)]


async def test_broker_that_forgot_the_producer_accepts_it_again(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """Producer state expired while the broker was down (producer.id.expiration.ms): the broker
    accepts our next sequence as a new producer's (KIP-360 brokers do), and nothing is lost or
    written twice."""
    b: BrokerProcess = broker_factory(env={"KETCH_FLUSH_MESSAGES": "1", "KETCH_PRODUCER_ID_EXPIRATION_MS": "1"})
    topic = unique_topic("expired")
    async with Admin(b.bootstrap) as admin:
        await admin.create_topic(topic, 2)
    async with Producer(b.bootstrap, retry_backoff_ms=50, request_timeout_ms=5_000) as p:
        first = [await p.send(topic, b"a%04d" % i, partition=i % 2) for i in range(500)]
        await p.flush()
        await asyncio.to_thread(b.restart)
        async with Admin(b.bootstrap) as admin:
            assert await admin.describe_producers(TopicPartition(topic, 0)) == []  # forgotten
        second = [await p.send(topic, b"b%04d" % i, partition=i % 2) for i in range(500)]
        await asyncio.wait_for(asyncio.gather(*first, *second), 60)
    values = await read_values(b.bootstrap, topic, 2)
    assert sorted(values) == sorted([b"a%04d" % i for i in range(500)] + [b"b%04d" % i for i in range(500)])


async def test_a_flush_that_times_out_leaves_its_records_in_flight(broker: BrokerProcess) -> None:
    """A flush (or close) that gives up waiting is the caller's timeout, not the records': they
    stay in flight and are delivered when the broker answers, and close does not raise."""
    topic = unique_topic("flush-timeout")
    async with Admin(broker.bootstrap) as admin:
        await admin.create_topic(topic, 1)
    p = Producer(broker.bootstrap, request_timeout_ms=30_000)
    await p.start()
    try:
        await (await p.send(topic, b"before"))  # connected, the topic's leader known
        broker.pause()
        try:
            fut = await p.send(topic, b"during")
            for _ in range(2):  # and again: the first one's timeout left nothing behind
                with pytest.raises(KafkaTimeoutError):
                    await p.flush(timeout=0.5)
            assert not fut.cancelled()
        finally:
            broker.resume()
        meta = await asyncio.wait_for(fut, 30)
        assert meta.offset == 1
    finally:
        await p.close(timeout=10)
    assert await read_values(broker.bootstrap, topic, 1) == [b"before", b"during"]


async def test_a_commit_the_caller_stopped_waiting_for_can_be_committed_again(broker: BrokerProcess) -> None:
    """`wait_for(commit_transaction(), t)` timing out cancels the commit call, not the records or
    the AddPartitionsToTxn it waits on: commit_transaction called again commits the transaction."""
    topic = unique_topic("commit-timeout")
    async with Admin(broker.bootstrap) as admin:
        await admin.create_topic(topic, 1)
    p = Producer(broker.bootstrap, transactional_id=unique_topic("tx"), request_timeout_ms=30_000)
    await p.start()
    try:
        await p.init_transactions()
        await p.begin_transaction()
        await (await p.send(topic, b"first"))
        broker.pause()
        try:
            fut = await p.send(topic, b"second")
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(p.commit_transaction(), 0.5)
            assert not fut.cancelled()
        finally:
            broker.resume()
        await asyncio.wait_for(p.commit_transaction(), 30)
    finally:
        await p.close(timeout=10)
    assert await read_values(broker.bootstrap, topic, 1, "read_committed") == [b"first", b"second"]
