"""Reading a topic back with the bundled client, from the beginning to the end offsets of the
moment: what most round-trip tests check their output with."""

from __future__ import annotations

import asyncio

from client import Consumer, ConsumerRecord, TopicPartition


async def read_records(bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted",
                       timeout: float = 60.0) -> list[ConsumerRecord]:
    """Every record visible at `isolation` in partitions 0..partitions-1, up to their current end."""
    async with Consumer(bootstrap, isolation_level=isolation, auto_offset_reset="earliest") as c:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        end = await c.end_offsets(tps)
        out: list[ConsumerRecord] = []

        async def drain() -> None:
            while any([await c.position(tp) < end[tp] for tp in tps]):
                for recs in (await c.getmany(timeout_ms=500)).values():
                    out.extend(recs)

        await asyncio.wait_for(drain(), timeout)
        return out


async def read_values(bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted") -> list[bytes]:
    return [r.value or b"" for r in await read_records(bootstrap, topic, partitions, isolation)]
