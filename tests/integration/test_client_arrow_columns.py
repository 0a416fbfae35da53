"""The columnar path of the bundled client against a real broker: runs framed from Arrow columns
(Producer.send_batch) inside transactions, read back whole (Consumer.getmany_batches) and decoded
to columns, must be exactly what the per-record API writes and reads."""

from __future__ import annotations

import asyncio

import pyarrow as pa
from helpers import BrokerProcess, unique_topic

from client import Admin, Consumer, FetchedBatches, Producer, TopicPartition, arrow


async def _read(bootstrap: str, tp: TopicPartition, batches: bool) -> list[tuple[int, bytes | None, bytes | None]]:
    async with Consumer(bootstrap, isolation_level="read_committed", auto_offset_reset="earliest",
                        max_partition_fetch_bytes=8192) as c:  # small fetches: many of them
        c.assign([tp])
        end = (await c.end_offsets([tp]))[tp]
        out: list[tuple[int, bytes | None, bytes | None]] = []
        while await c.position(tp) < end:
            if batches:
                got: dict[TopicPartition, FetchedBatches] = await c.getmany_batches(tp, timeout_ms=1000)
                for f in got.values():
                    d = arrow.to_arrow(f).to_pydict()
                    out += zip(d["offset"], d["key"], d["value"], strict=True)
            else:
                for recs in (await c.getmany(tp, timeout_ms=1000)).values():
                    out += [(r.offset, r.key, r.value) for r in recs]
        return out


async def test_framed_runs_in_transactions_read_back_as_columns(module_broker: BrokerProcess) -> None:
    b = module_broker.bootstrap
    topic = unique_topic("client-arrow")
    async with Admin(b) as admin:
        await admin.create_topic(topic, 2)
    keys = pa.array([b"k%d" % (i % 13) if i % 5 else None for i in range(3000)], pa.binary())
    values = pa.array([b"v%05d" % i for i in range(3000)], pa.binary())
    parts = arrow.partitions_for_keys(keys, 2).to_pylist()
    async with Producer(b, transactional_id=f"{topic}-txn") as p:
        await p.init_transactions()
        # aborted: framed runs and single records alike must stay invisible
        await p.begin_transaction()
        for run in arrow.encode(None, pa.array([b"ABORTED"] * 500), max_bytes=4096):
            await p.send_batch(topic, 0, run)
        await p.send(topic, b"ABORTED", partition=1)
        await p.flush()
        await p.abort_transaction()
        # committed: a record sent one by one before the runs of its partition keeps its place
        await p.begin_transaction()
        first = await p.send(topic, b"first", partition=0)
        metas = []
        for part in (0, 1):
            rows = [i for i in range(3000) if (parts[i] if parts[i] is not None else 0) == part]
            runs = arrow.encode(keys.take(rows), values.take(rows), max_bytes=4096, timestamp_ms=7)
            assert len(runs) > 1
            metas += [(part, run.record_count, await p.send_batch(topic, part, run)) for run in runs]
        await p.commit_transaction()
    assert (await first).offset < (await metas[0][2]).offset
    for part in (0, 1):  # each run's future says where its first record went; runs follow each other
        mine = [(n, await f) for q, n, f in metas if q == part]
        for (n, m), (_, nxt) in zip(mine, mine[1:], strict=False):
            assert nxt.offset == m.offset + n and m.partition == part and m.timestamp == 7

    for part in (0, 1):
        tp = TopicPartition(topic, part)
        per_record = await _read(b, tp, batches=False)
        columnar = await _read(b, tp, batches=True)
        assert columnar == per_record
        want = ([b"first"] if part == 0 else []) + [
            values[i].as_py() for i in range(3000) if (parts[i] if parts[i] is not None else 0) == part]
        assert [v for _, _, v in columnar] == want


async def test_getmany_batches_after_records_were_taken_one_by_one(module_broker: BrokerProcess) -> None:
    b = module_broker.bootstrap
    topic = unique_topic("client-arrow-mixed")
    async with Admin(b) as admin:
        await admin.create_topic(topic, 1)
    tp = TopicPartition(topic, 0)
    async with Producer(b) as p:
        await asyncio.gather(*[await p.send(topic, b"%d" % i, partition=0) for i in range(100)])
    async with Consumer(b, auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.assign([tp])
        seen: list[bytes | None] = []
        while not seen:
            seen += [r.value for r in (await c.getmany(tp, timeout_ms=1000, max_records=10)).get(tp, [])]
        while await c.position(tp) < 100:
            for f in (await c.getmany_batches(tp, timeout_ms=1000)).values():
                seen += arrow.to_arrow(f).column("value").to_pylist()
    assert seen == [b"%d" % i for i in range(100)]
