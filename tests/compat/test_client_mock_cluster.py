"""The bundled client against an independent broker implementation: librdkafka's mock cluster
(started inside a confluent-kafka client with test.mock.num.brokers). Produce, consume, groups and
transactions, as far as the mock implements them (it auto-creates topics, 4 partitions)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest

from client import Consumer, Producer, TopicPartition

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def mock_bootstrap() -> Iterator[str]:
    owner = confluent_kafka.Producer({"test.mock.num.brokers": 1, "log_level": 3})
    md = owner.list_topics(timeout=10)
    brokers = list(md.brokers.values())
    assert brokers, "mock cluster reported no brokers"
    yield ",".join(f"{b.host}:{b.port}" for b in brokers)
    owner.flush(5)
    del owner


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def read(bs: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    # check_crcs off: the mock writes its transaction markers with a zero CRC (librdkafka's own
    # consumer reports them as corrupt too when check.crcs is on)
    async with Consumer(bs, isolation_level=isolation, auto_offset_reset="earliest", check_crcs=False) as c:
        tps = [TopicPartition(topic, p) for p in range(4)]
        c.assign(tps)
        out: list[bytes] = []

        async def drain() -> None:
            while len(out) < expected:
                for recs in (await c.getmany(timeout_ms=500)).values():
                    out.extend(r.value or b"" for r in recs)

        await asyncio.wait_for(drain(), 30)
        extra = await c.getmany(timeout_ms=500)
        out.extend(r.value or b"" for recs in extra.values() for r in recs)
        return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
async def test_produce_and_consume(mock_bootstrap: str, codec: str) -> None:
    topic = name("mock-rt")
    async with Producer(mock_bootstrap, compression=codec) as p:
        metas = await asyncio.gather(*[await p.send(topic, b"%d" % i, key=b"%d" % i) for i in range(500)])
        n = len(await p.partitions_for(topic))
    assert n == 4
    per_part: dict[int, list[int]] = {}
    for m in metas:
        per_part.setdefault(m.partition, []).append(m.offset)
    assert all(offs == list(range(len(offs))) for offs in per_part.values())
    assert sorted(await read(mock_bootstrap, topic, "read_uncommitted", 500)) == sorted(b"%d" % i for i in range(500))


async def test_transactions(mock_bootstrap: str) -> None:
    topic = name("mock-txn")
    async with Producer(mock_bootstrap, transactional_id=name("tx")) as p:
        await p.init_transactions()
        async with p.transaction():
            for i in range(20):
                await p.send(topic, b"c%d" % i)
        await p.begin_transaction()
        for i in range(20):
            await p.send(topic, b"a%d" % i)
        await p.flush()
        await p.abort_transaction()
        async with p.transaction():
            await p.send(topic, b"last")
    # The mock completes the whole protocol (InitProducerId, AddPartitionsToTxn, EndTxn, markers)
    # but keeps no aborted-transaction index: its Fetch answers list no aborted transactions, so
    # no client can drop the aborted records there. What we can check: every committed record is
    # readable at read_committed, and the aborted ones were written and then closed by a marker.
    got = await read(mock_bootstrap, topic, "read_committed", 41)
    committed = [b"c%d" % i for i in range(20)] + [b"last"]
    assert set(committed) <= set(got) and len(got) == 41


async def test_group_consumer_and_commit(mock_bootstrap: str) -> None:
    topic, group = name("mock-grp"), name("g")
    async with Producer(mock_bootstrap) as p:
        await asyncio.gather(*[await p.send(topic, b"%d" % i) for i in range(100)])
    async with Consumer(mock_bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                        assignors=("range",)) as c:
        c.subscribe([topic])
        seen: list[bytes] = []

        async def drain() -> None:
            while len(seen) < 100:
                for recs in (await c.getmany(timeout_ms=500)).values():
                    seen.extend(r.value or b"" for r in recs)

        await asyncio.wait_for(drain(), 60)
        assert len(c.assignment()) == 4
        await c.commit()
        tp = TopicPartition(topic, 0)
        assert await c.committed(tp) == await c.position(tp)
    assert sorted(seen) == sorted(b"%d" % i for i in range(100))
