"""The bundled client against a real Ketch broker: the compat scenarios of the earlier issues
(round trips per codec and idempotence, read_committed on plain data, null keys/values, headers,
admin topics) plus consumer positioning (seek, position, pause/resume) and acks variants."""

from __future__ import annotations

import asyncio

import pytest
from helpers import BrokerProcess, Consumed, Msg, make_messages, unique_topic, verify_round_trip

from client import Admin, Consumer, Producer, TopicAlreadyExistsError, TopicPartition, UnknownTopicError

PARTITIONS = 6
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
COUNT = {"none": 10_000, "gzip": 3_000, "snappy": 3_000, "lz4": 3_000, "zstd": 3_000}


async def create(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(name, partitions)


async def produce(bootstrap: str, topic: str, msgs: list[Msg], **conf: object) -> dict[int, tuple[int, int]]:
    async with Producer(bootstrap, **conf) as p:  # type: ignore[arg-type]
        futs = [await p.send(topic, m.value, key=m.key) for m in msgs]
        metas = await asyncio.wait_for(asyncio.gather(*futs), 90)
    return {m.idx: (md.partition, md.offset) for m, md in zip(msgs, metas, strict=True)}


async def consume_all(bootstrap: str, topic: str, partitions: int = PARTITIONS,
                      isolation: str = "read_uncommitted") -> list[Consumed]:
    async with Consumer(bootstrap, isolation_level=isolation, auto_offset_reset="earliest") as c:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        end = await c.end_offsets(tps)
        out: list[Consumed] = []

        async def behind() -> bool:
            return any([await c.position(tp) < end[tp] for tp in tps])

        async def drain() -> None:
            while await behind():
                for tp, recs in (await c.getmany(timeout_ms=500)).items():
                    out.extend(Consumed(tp.partition, r.offset, r.key, r.value) for r in recs)

        await asyncio.wait_for(drain(), 90)
        return out


@pytest.mark.parametrize("idempotence", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
async def test_round_trip(module_broker: BrokerProcess, codec: str, idempotence: bool) -> None:
    name = unique_topic(f"client-{codec}-{idempotence}")
    await create(module_broker.bootstrap, name)
    msgs = make_messages(COUNT[codec], seed=CODECS.index(codec) * 2 + idempotence)
    acks = await produce(module_broker.bootstrap, name, msgs, compression=codec, enable_idempotence=idempotence)
    consumed = await consume_all(module_broker.bootstrap, name)
    verify_round_trip(msgs, consumed, partitions=PARTITIONS, acks=acks)


async def test_read_committed_sees_all_non_transactional_data(module_broker: BrokerProcess) -> None:
    name = unique_topic("client-rc-plain")
    await create(module_broker.bootstrap, name)
    msgs = make_messages(2_000, seed=99)
    acks = await produce(module_broker.bootstrap, name, msgs)
    consumed = await consume_all(module_broker.bootstrap, name, isolation="read_committed")
    verify_round_trip(msgs, consumed, partitions=PARTITIONS, acks=acks)


@pytest.mark.parametrize("acks", [0, 1])
async def test_acks_zero_and_one(module_broker: BrokerProcess, acks: int) -> None:
    name = unique_topic(f"client-acks{acks}")
    await create(module_broker.bootstrap, name, 1)
    async with Producer(module_broker.bootstrap, acks=acks) as p:
        metas = [await p.send_and_wait(name, b"v%d" % i) for i in range(50)]
    assert [m.offset for m in metas] == ([-1] * 50 if acks == 0 else list(range(50)))
    got = await consume_all(module_broker.bootstrap, name, 1)
    assert [c.value for c in got] == [b"v%d" % i for i in range(50)]


async def test_null_key_null_value_and_headers(module_broker: BrokerProcess) -> None:
    name = unique_topic("client-nulls")
    await create(module_broker.bootstrap, name, 1)
    headers = [("a", b"1"), ("empty", b""), ("none", None), ("a", b"dup")]
    async with Producer(module_broker.bootstrap) as p:
        await p.send_and_wait(name, None, key=b"k")
        await p.send_and_wait(name, b"v", key=None)
        await p.send_and_wait(name, b"h", headers=headers, timestamp_ms=1_600_000_000_000)
    async with Consumer(module_broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(name, 0)])
        recs = [await c.getone(timeout_ms=10_000) for _ in range(3)]
    assert [(r.key, r.value) for r in recs if r] == [(b"k", None), (None, b"v"), (None, b"h")]
    assert recs[2] is not None and list(recs[2].headers) == headers and recs[2].timestamp == 1_600_000_000_000


async def test_admin_topics(module_broker: BrokerProcess) -> None:
    name = unique_topic("client-admin")
    async with Admin(module_broker.bootstrap) as admin:
        await admin.create_topic(name, 4)
        with pytest.raises(TopicAlreadyExistsError):
            await admin.create_topic(name, 4)
        desc = (await admin.describe_topics([name]))[name]
        assert [p.partition for p in desc.partitions] == [0, 1, 2, 3]
        assert all(p.leader >= 0 for p in desc.partitions)
        assert name in await admin.list_topics()
        await admin.delete_topic(name)
        assert name not in await admin.list_topics()
        with pytest.raises(UnknownTopicError):
            await admin.describe_topics([name])


async def test_consumer_partitions_for_sees_new_partitions_and_refuses_unknown_topics(
        module_broker: BrokerProcess) -> None:
    # What the Spark source's planner asks every micro-batch, without an admin client of its own.
    name, other = unique_topic("client-parts"), unique_topic("client-parts-other")
    async with Admin(module_broker.bootstrap) as admin:
        await admin.create_topic(name, 2)
        await admin.create_topic(other, 1)
        async with Consumer(module_broker.bootstrap) as c:
            assert await c.partitions_for([name, other]) == [TopicPartition(name, 0), TopicPartition(name, 1),
                                                            TopicPartition(other, 0)]
            assert (await admin.create_partitions({name: 3}))[name] is None
            assert await c.partitions_for([name]) == [TopicPartition(name, p) for p in range(3)]
            await admin.delete_topic(other)
            with pytest.raises(UnknownTopicError):
                await c.partitions_for([name, other])
            with pytest.raises(UnknownTopicError):
                await c.partitions_for([unique_topic("client-parts-never")])


async def test_seek_position_pause_resume(module_broker: BrokerProcess) -> None:
    name = unique_topic("client-seek")
    await create(module_broker.bootstrap, name, 2)
    tp0, tp1 = TopicPartition(name, 0), TopicPartition(name, 1)
    async with Producer(module_broker.bootstrap) as p:
        for i in range(20):
            await p.send(name, b"%d" % i, partition=i % 2)
        await p.flush()
    async with Consumer(module_broker.bootstrap, auto_offset_reset="latest") as c:
        c.assign([tp0, tp1])
        assert await c.position(tp0) == 10  # latest
        c.seek(tp0, 7)
        c.seek_to_beginning(tp1)
        assert await c.position(tp1) == 0
        c.pause(tp1)
        got = await c.getmany(timeout_ms=5_000)
        assert set(got) == {tp0} and [r.offset for r in got[tp0]] == [7, 8, 9]
        assert await c.position(tp0) == 10
        c.resume(tp1)
        got = await c.getmany(timeout_ms=5_000)
        assert [r.value for r in got[tp1]] == [b"%d" % i for i in range(1, 20, 2)]
        c.seek_to_end(tp1)
        assert await c.position(tp1) == 10
        assert c.highwater(tp1) == 10


async def test_async_iteration_yields_records_in_offset_order(module_broker: BrokerProcess) -> None:
    name = unique_topic("client-iter")
    await create(module_broker.bootstrap, name, 1)
    async with Producer(module_broker.bootstrap, linger_ms=0, batch_size=200) as p:
        for i in range(300):
            await p.send(name, b"%d" % i)
        await p.flush()
    seen: list[int] = []
    async with Consumer(module_broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(name, 0)])

        async def read() -> None:
            async for r in c:
                seen.append(r.offset)
                if len(seen) == 300:
                    break

        await asyncio.wait_for(read(), 30)
    assert seen == list(range(300))
