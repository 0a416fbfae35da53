"""The source's conversations with the broker, through Ketch's own asyncio client.

Spark calls data sources synchronously, from Python worker processes that each run one task at a
time, so every entry point here is a plain function that runs its own event loop
(`asyncio.run`) for the duration of one call: nothing asynchronous outlives a call, and no loop
is shared between the driver's planner and the tasks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator
from typing import TypeVar

from client import Admin, Consumer, ConsumerRecord, TopicPartition

from .offsets import Offsets
from .options import SourceOptions

T = TypeVar("T")

# Records handed to Spark per Arrow batch / per chunk: large enough to amortise per-batch costs,
# small enough that a task's memory stays flat whatever the partition's size.
CHUNK = 8192


class ReadTimeout(TimeoutError):
    """A partition range that the broker said exists could not be read to its end in time."""


async def _partitions(bootstrap: str, topics: Iterable[str]) -> list[TopicPartition]:
    async with Admin(bootstrap) as admin:
        described = await admin.describe_topics(list(topics))
    return sorted(TopicPartition(name, p.partition) for name, d in described.items() for p in d.partitions)


async def _bounds(bootstrap: str, tps: list[TopicPartition], read_committed: bool) -> tuple[Offsets, Offsets]:
    """(earliest, latest) per partition; latest is the last stable offset at read_committed,
    so a range never ends inside a transaction that is still undecided."""
    if not tps:
        return {}, {}
    isolation = "read_committed" if read_committed else "read_uncommitted"
    async with Consumer(bootstrap, isolation_level=isolation, enable_auto_commit=False) as c:
        keys = [TopicPartition(t, p) for t, p in tps]
        first = await c.beginning_offsets(keys)
        last = await c.end_offsets(keys)
    return (dict(first),
            dict(last))


def discover(opts: SourceOptions) -> list[TopicPartition]:
    """Partitions the source reads now (subscribed topics can grow partitions between calls)."""
    if opts.assign:
        return list(opts.assign)
    return asyncio.run(_partitions(opts.bootstrap, opts.topics))


def bounds(opts: SourceOptions, tps: list[TopicPartition]) -> tuple[Offsets, Offsets]:
    return asyncio.run(_bounds(opts.bootstrap, tps, opts.read_committed))


async def _read_range(opts: SourceOptions, tp: TopicPartition, start: int, end: int
                      ) -> AsyncGenerator[list[ConsumerRecord], None]:
    """Chunks of the records at offsets [start, end) of one partition, in offset order.

    At read_committed, aborted records and transaction markers are never handed out but still
    occupy offsets, so the loop ends when the consumer's *position* reaches `end`, not when it has
    seen a record at end - 1 (which may not exist).
    """
    key = TopicPartition(*tp)
    async with Consumer(opts.bootstrap, isolation_level=opts.isolation_level, enable_auto_commit=False,
                        auto_offset_reset="earliest", fetch_max_wait_ms=100,
                        max_partition_fetch_bytes=4 * 1024 * 1024) as c:
        c.assign([key])
        c.seek(key, start)
        deadline = time.monotonic() + opts.poll_timeout_ms / 1000
        while await c.position(key) < end:
            got = await c.getmany(key, timeout_ms=200, max_records=CHUNK)
            chunk = [r for r in got.get(key, ()) if r.offset < end]
            if chunk:
                deadline = time.monotonic() + opts.poll_timeout_ms / 1000
                yield chunk
            elif time.monotonic() > deadline:
                raise ReadTimeout(f"{tp[0]}-{tp[1]}: stuck at offset {await c.position(key)}, "
                                  f"range ends at {end}")


def read_range(opts: SourceOptions, tp: TopicPartition, start: int, end: int,
               convert: Callable[[list[ConsumerRecord]], Iterable[T]]) -> Iterator[T]:
    """The synchronous face of `_read_range` that Spark's read() can return from.

    Spark pulls rows from the iterator we return, so the async generator is stepped from a private
    event loop, one chunk per step; the loop is closed when the iterator is exhausted or dropped.
    """
    if start >= end:
        return
    loop = asyncio.new_event_loop()
    agen = _read_range(opts, tp, start, end)
    try:
        while True:
            try:
                chunk = loop.run_until_complete(agen.__anext__())
            except StopAsyncIteration:
                break
            yield from convert(chunk)
    finally:
        loop.run_until_complete(agen.aclose())
        loop.close()
