"""Failure handling of the bundled client against real broker processes: a broker restart in the
middle of an idempotent produce (nothing lost, nothing duplicated), and transactional calls right
after a restart, while the coordinator reloads its state (retried until they succeed)."""

from __future__ import annotations

import asyncio

from helpers import BrokerProcess, unique_topic

from client import Admin, Consumer, Producer, TopicPartition


async def read_values(bs: str, topic: str, partitions: int, isolation: str = "read_uncommitted") -> list[bytes]:
    async with Consumer(bs, isolation_level=isolation, auto_offset_reset="earliest") as c:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        end = await c.end_offsets(tps)
        out: list[bytes] = []

        async def drain() -> None:
            while any([await c.position(tp) < end[tp] for tp in tps]):
                for recs in (await c.getmany(timeout_ms=500)).values():
                    out.extend(r.value or b"" for r in recs)

        await asyncio.wait_for(drain(), 60)
        return out


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
