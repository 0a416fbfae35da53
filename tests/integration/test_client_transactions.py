"""Transactions with the bundled client against a real Ketch broker: commit/abort visibility at
read_committed, consume-transform-produce with offsets in the transaction, fencing, the context
manager, and commit waiting for in-flight sends."""

from __future__ import annotations

import pytest
from helpers import BrokerProcess, unique_topic
from helpers.consume import read_records

from client import (
    Admin,
    Consumer,
    IllegalStateError,
    Producer,
    ProducerFencedError,
    ProducerTxnState,
)


async def create(bootstrap: str, *topics: tuple[str, int]) -> None:
    async with Admin(bootstrap) as admin:
        for name, n in topics:
            await admin.create_topic(name, n)


async def read_all(bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed"
                   ) -> list[tuple[int, int, bytes | None]]:
    """(partition, offset, value) of everything visible at `isolation`, to the end offsets."""
    return [(r.partition, r.offset, r.value) for r in await read_records(bootstrap, topic, partitions, isolation)]


async def test_committed_visible_aborted_not(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("ctx-vis")
    await create(bs, (topic, 3))
    async with Producer(bs, transactional_id=unique_topic("tx")) as p:
        await p.init_transactions()
        assert p.transaction_state is ProducerTxnState.READY
        await p.begin_transaction()
        for i in range(30):
            await p.send(topic, b"commit-%d" % i, key=b"%d" % i)
        await p.commit_transaction()
        await p.begin_transaction()
        for i in range(30):
            await p.send(topic, b"abort-%d" % i, key=b"%d" % i)
        await p.flush()  # written to the log, then aborted
        await p.abort_transaction()
        async with p.transaction():
            await p.send(topic, b"last", key=b"x")
    committed = await read_all(bs, topic, 3)
    assert sorted(v for _, _, v in committed if v) == sorted([b"commit-%d" % i for i in range(30)] + [b"last"])
    uncommitted = await read_all(bs, topic, 3, "read_uncommitted")
    assert sum(1 for _, _, v in uncommitted if v and v.startswith(b"abort-")) == 30
    # offsets stay in log order per partition, and the markers take offsets that are never returned
    for part in range(3):
        offs = [o for p_, o, _ in committed if p_ == part]
        assert offs == sorted(offs)


async def test_context_manager_aborts_on_exception(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("ctx-exc")
    await create(bs, (topic, 1))
    async with Producer(bs, transactional_id=unique_topic("tx")) as p:
        await p.init_transactions()
        with pytest.raises(RuntimeError):
            async with p.transaction():
                await p.send(topic, b"doomed")
                await p.flush()
                raise RuntimeError("boom")
        assert p.transaction_state is ProducerTxnState.READY
        async with p.transaction():
            await p.send(topic, b"kept")
    assert [v for _, _, v in await read_all(bs, topic, 1)] == [b"kept"]


async def test_commit_waits_for_in_flight_sends(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("ctx-inflight")
    await create(bs, (topic, 4))
    async with Producer(bs, transactional_id=unique_topic("tx"), linger_ms=1000) as p:
        await p.init_transactions()
        await p.begin_transaction()
        futs = [await p.send(topic, b"%d" % i) for i in range(2_000)]
        assert not all(f.done() for f in futs)  # lingering: nothing acknowledged yet
        await p.commit_transaction()
        assert all(f.done() and not f.exception() for f in futs)
    assert len(await read_all(bs, topic, 4)) == 2_000


async def test_send_outside_transaction_is_refused(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("ctx-refuse")
    await create(bs, (topic, 1))
    async with Producer(bs, transactional_id=unique_topic("tx")) as p:
        with pytest.raises(IllegalStateError):
            await p.begin_transaction()  # before init_transactions
        await p.init_transactions()
        with pytest.raises(IllegalStateError):
            await p.send(topic, b"x")
        with pytest.raises(IllegalStateError):
            await p.commit_transaction()


async def test_fenced_producer_raises_fatal_error_and_its_data_is_aborted(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("ctx-fence")
    tid = unique_topic("tx-fence")
    await create(bs, (topic, 2))
    async with Producer(bs, transactional_id=tid) as old, Producer(bs, transactional_id=tid) as new:
        await old.init_transactions()
        await old.begin_transaction()
        await old.send_and_wait(topic, b"zombie", partition=0)
        # a new instance with the same id: the coordinator aborts the open transaction (the client
        # retries CONCURRENT_TRANSACTIONS meanwhile) and bumps the epoch
        await new.init_transactions()
        async with new.transaction():
            await new.send(topic, b"fresh", partition=1)
        await old.send(topic, b"zombie-2", partition=1)
        with pytest.raises(ProducerFencedError) as info:
            await old.commit_transaction()
        assert "zombie" in str(info.value)
        assert old.transaction_state is ProducerTxnState.FATAL_ERROR
        with pytest.raises(ProducerFencedError):
            await old.begin_transaction()
    values = [v for _, _, v in await read_all(bs, topic, 2)]
    assert values == [b"fresh"]


async def test_consume_transform_produce_with_group_offsets(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    src, dst = unique_topic("ctp-in"), unique_topic("ctp-out")
    group = unique_topic("ctp-group")
    await create(bs, (src, 3), (dst, 3))
    async with Producer(bs) as p:
        for i in range(300):
            await p.send(src, b"%d" % i, key=b"%d" % i)
        await p.flush()

    async def run(limit: int, abort_last: bool) -> int:
        """Process at least `limit` records; returns how many were committed."""
        done = committed = 0
        async with Producer(bs, transactional_id=group + "-tx") as tp, Consumer(
                bs, group_id=group, isolation_level="read_committed", auto_offset_reset="earliest",
                enable_auto_commit=False) as c:
            await tp.init_transactions()
            c.subscribe([src])
            while done < limit:
                batch = await c.getmany(timeout_ms=10_000, max_records=50)
                assert batch, "no records before the deadline"
                await tp.begin_transaction()
                for recs in batch.values():
                    for r in recs:
                        await tp.send(dst, b"out-" + (r.value or b""), key=r.key)
                await tp.send_offsets_to_transaction(
                    {t: recs[-1].offset + 1 for t, recs in batch.items()}, c.group_metadata())
                n = sum(len(v) for v in batch.values())
                if abort_last and done + n >= limit:
                    await tp.abort_transaction()
                else:
                    await tp.commit_transaction()
                    committed += n
                done += n
        return committed

    first = await run(120, abort_last=True)  # the last transaction is aborted: its input is read again
    assert 0 < first < 300
    assert await run(300 - first, abort_last=False) == 300 - first
    out = await read_all(bs, dst, 3)
    assert sorted(v for _, _, v in out) == sorted(b"out-%d" % i for i in range(300))
