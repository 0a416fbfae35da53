"""Interop both ways: transactions written by our client are read correctly at read_committed by
confluent-kafka and aiokafka, and transactions they write are read correctly by our consumer."""

from __future__ import annotations

import asyncio
import time

import confluent_kafka
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTP
from helpers import BrokerProcess, unique_topic
from helpers.consume import read_values

from client import Admin, Producer

pytestmark = pytest.mark.compat
PARTS = 3
COMMITTED = sorted([b"c-%d" % i for i in range(40)] + [b"c2-%d" % i for i in range(10)])


async def create(bs: str, topic: str) -> None:
    async with Admin(bs) as admin:
        await admin.create_topic(topic, PARTS)


async def write_ours(bs: str, topic: str) -> None:
    async with Producer(bs, transactional_id=unique_topic("ours")) as p:
        await p.init_transactions()
        async with p.transaction():
            for i in range(40):
                await p.send(topic, b"c-%d" % i, key=b"%d" % i)
        await p.begin_transaction()
        for i in range(40):
            await p.send(topic, b"a-%d" % i, key=b"%d" % i)
        await p.flush()
        await p.abort_transaction()
        async with p.transaction():
            for i in range(10):
                await p.send(topic, b"c2-%d" % i, key=b"%d" % i)


def write_confluent(bs: str, topic: str) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": bs, "transactional.id": unique_topic("ck"), "log_level": 3})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(40):
        p.produce(topic, b"c-%d" % i, key=b"%d" % i)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(40):
        p.produce(topic, b"a-%d" % i, key=b"%d" % i)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, b"c2-%d" % i, key=b"%d" % i)
    p.commit_transaction(30)


async def write_aiokafka(bs: str, topic: str) -> None:
    p = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=unique_topic("aio"))
    await p.start()
    try:
        async with p.transaction():
            for i in range(40):
                await p.send(topic, b"c-%d" % i, key=b"%d" % i)
        await p.begin_transaction()
        for i in range(40):
            await p.send(topic, b"a-%d" % i, key=b"%d" % i)
        await p.abort_transaction()
        async with p.transaction():
            for i in range(10):
                await p.send(topic, b"c2-%d" % i, key=b"%d" % i)
    finally:
        await p.stop()


async def read_ours(bs: str, topic: str) -> list[bytes]:
    return await read_values(bs, topic, PARTS, "read_committed")


def read_confluent(bs: str, topic: str) -> list[bytes]:
    c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": unique_topic("ckr"), "log_level": 3,
                                  "isolation.level": "read_committed", "enable.partition.eof": True,
                                  "auto.offset.reset": "earliest"})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTS)])
        out, eof = [], set()
        deadline = time.monotonic() + 60
        while len(eof) < PARTS:
            assert time.monotonic() < deadline, f"confluent read only {len(out)} records"
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, m.error()
                eof.add(m.partition())
                continue
            out.append(m.value())
        return out
    finally:
        c.close()


async def read_aiokafka(bs: str, topic: str) -> list[bytes]:
    c = AIOKafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed", auto_offset_reset="earliest",
                         enable_auto_commit=False)
    await c.start()
    try:
        tps = [AioTP(topic, p) for p in range(PARTS)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        end = await c.end_offsets(tps)
        out: list[bytes] = []
        deadline = time.monotonic() + 60
        while any([await c.position(tp) < end[tp] for tp in tps]):
            assert time.monotonic() < deadline
            for recs in (await c.getmany(timeout_ms=500)).values():
                out.extend(r.value for r in recs)
        return out
    finally:
        await c.stop()


async def test_confluent_and_aiokafka_read_our_transactions(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("interop-ours")
    await create(bs, topic)
    await write_ours(bs, topic)
    assert sorted(await asyncio.to_thread(read_confluent, bs, topic)) == COMMITTED
    assert sorted(await read_aiokafka(bs, topic)) == COMMITTED
    assert sorted(await read_ours(bs, topic)) == COMMITTED


async def test_we_read_confluent_transactions(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("interop-ck")
    await create(bs, topic)
    await asyncio.to_thread(write_confluent, bs, topic)
    assert sorted(await read_ours(bs, topic)) == COMMITTED


async def test_we_read_aiokafka_transactions(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("interop-aio")
    await create(bs, topic)
    await write_aiokafka(bs, topic)
    assert sorted(await read_ours(bs, topic)) == COMMITTED
