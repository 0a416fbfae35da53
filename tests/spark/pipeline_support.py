"""Broker-side helpers for the pipeline tests: transactional input with aborted transactions
interleaved, and reading a topic back the way a downstream consumer would (read_committed)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

from client import Admin, Consumer, ConsumerRecord, Producer, TopicPartition


async def create_topics(bootstrap: str, names: Sequence[str], partitions: int = 2) -> None:
    async with Admin(bootstrap) as admin:
        for n in names:
            await admin.create_topic(n, partitions)


async def produce_with_aborts(bootstrap: str, topic: str, n: int, *, txn_size: int = 50,
                              abort_every: int = 3, first: int = 0) -> list[tuple[bytes, bytes]]:
    """Commit n keyed messages in transactions; every `abort_every`-th transaction is an aborted
    one full of poison values. Returns the committed (key, value) pairs."""
    committed: list[tuple[bytes, bytes]] = []
    txns = 0
    i, n = first, first + n
    async with Producer(bootstrap, transactional_id=f"{topic}-gen") as p:
        await p.init_transactions()
        while i < n:
            txns += 1
            if txns % abort_every == 0:
                await p.begin_transaction()
                for j in range(i, i + txn_size):
                    await p.send(topic, b"ABORTED-%d" % j, key=b"k%d" % j)
                await p.flush()  # the records must reach the log: abort drops what is unsent
                await p.abort_transaction()
            items = [(b"k%d" % (j % 17), b"m%06d" % j) for j in range(i, min(n, i + txn_size))]
            await p.begin_transaction()
            for k, v in items:
                await p.send(topic, v, key=k)
            await p.commit_transaction()
            committed += items
            i += len(items)
    return committed


async def read_committed(bootstrap: str, topic: str, timeout: float = 60.0) -> list[ConsumerRecord]:
    """Every record of `topic` visible at read_committed, up to its current last stable offsets."""
    async with Admin(bootstrap) as admin:
        desc = await admin.describe_topics([topic])
    tps = [TopicPartition(topic, p.partition) for p in desc[topic].partitions]
    async with Consumer(bootstrap, isolation_level="read_committed", auto_offset_reset="earliest",
                        enable_auto_commit=False) as c:
        c.assign(tps)
        end = await c.end_offsets(tps)
        for tp in tps:
            c.seek(tp, 0)
        out: list[ConsumerRecord] = []

        async def drain() -> None:
            while True:
                behind = [tp for tp in tps if await c.position(tp) < end[tp]]
                if not behind:
                    return
                for recs in (await c.getmany(timeout_ms=200)).values():
                    out.extend(r for r in recs if r.offset < end[TopicPartition(r.topic, r.partition)])

        await asyncio.wait_for(drain(), timeout)
    return out


def read_committed_sync(bootstrap: str, topic: str) -> list[ConsumerRecord]:
    return asyncio.run(read_committed(bootstrap, topic))


def checkpoint_batches(query_checkpoint: Path) -> dict[int, dict[str, dict[str, int]]]:
    """Committed micro-batches of a query: batch id -> the source's end offsets (Spark's offset log
    is 'v1', a metadata line, then one JSON line per source)."""
    out = {}
    commits = query_checkpoint / "commits"
    for f in sorted(commits.iterdir()) if commits.exists() else []:
        if f.name.isdigit():
            lines = (query_checkpoint / "offsets" / f.name).read_text().splitlines()
            out[int(f.name)] = json.loads(lines[2])
    return out
