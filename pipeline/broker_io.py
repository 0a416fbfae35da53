"""The source's conversations with the broker, through Ketch's own asyncio client.

Spark calls data sources synchronously, from Python worker processes that each run one task at a
time; every entry point here is a plain function that runs its coroutine on the process's loop
(runtime.py), where the clients stay connected from one call to the next: the planner's consumer
(partitions and offsets), the sink's admin client, and the tasks' consumer (each task assigns its
own partition, and leaves the assignment empty when it is done, so nothing is fetched between
tasks).

The source's planning needs only a consumer: Spark's streaming source runner, which plans every
micro-batch, is a fresh process per query, and importing the admin client would cost it about
0.2 s (docs/pipeline.md, Performance). The admin client is imported when the sink first asks.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from client import Consumer, FetchedBatches, Security, TopicPartition
from protocol.clock import SYSTEM_CLOCK

from . import runtime
from .offsets import Offsets
from .options import SourceOptions

if TYPE_CHECKING:
    from client import Admin, TopicDescription

T = TypeVar("T")

# Records handed to Spark per chunk on the row path: large enough to amortise per-chunk costs,
# small enough that a task's memory stays flat whatever the partition's size. (The Arrow path
# hands over one batch per fetch, at most MAX_FETCH_BYTES of records.)
CHUNK = 8192
MAX_FETCH_BYTES = 4 * 1024 * 1024


class Reach(Protocol):
    """How to reach the brokers: SourceOptions and SinkOptions both say."""

    @property
    def bootstrap(self) -> str: ...

    @property
    def security(self) -> Security: ...


class ReadTimeout(TimeoutError):
    """A partition range that the broker said exists could not be read to its end in time."""


async def _close(client: Any) -> None:
    await client.close()


async def _kept(name: str, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
    """The process's client `name` for `key`, started on first use. Planner clients are shared by
    every call (never taken out of the cache); a failing one is closed and made again next time."""
    cache = runtime.runtime().cache(name, _close)
    client = cache.take(key)
    if client is None:
        client = make()
        try:
            await client.start()
        except BaseException:
            await cache.discard(client)
            raise
    await cache.give_back(key, client)
    return client


async def _drop(name: str, key: tuple[Any, ...]) -> None:
    cache = runtime.runtime().cache(name, _close)
    client = cache.take(key)
    if client is not None:
        await cache.discard(client)


async def _planner_call(name: str, key: tuple[Any, ...], make: Callable[[], Any], call: Callable[[Any], Any]) -> Any:
    client = await _kept(name, key, make)
    try:
        return await call(client)
    except BaseException:
        await _drop(name, key)
        raise


async def admin_call(to: Reach, call: Callable[[Admin], Awaitable[T]]) -> T:
    """`call` on the process's kept admin client for those brokers (made again if a call fails)."""
    from client import Admin

    result: T = await _planner_call("admin", (to.bootstrap, to.security),
                                    lambda: Admin(to.bootstrap, security=to.security), call)
    return result


async def describe_topics(to: Reach, topics: Iterable[str]) -> dict[str, TopicDescription]:
    """Admin.describe_topics on the process's kept admin client."""
    names = list(topics)
    return await admin_call(to, lambda admin: admin.describe_topics(names))


async def _planner(opts: SourceOptions, call: Callable[[Consumer], Awaitable[T]]) -> T:
    """`call` on the process's kept planner consumer (made again if a call fails)."""
    isolation = opts.isolation_level
    result: T = await _planner_call(
        "offsets", (opts.bootstrap, opts.security, isolation),
        lambda: Consumer(opts.bootstrap, isolation_level=isolation, enable_auto_commit=False, security=opts.security),
        call)
    return result


async def _bounds(opts: SourceOptions, tps: list[TopicPartition]) -> tuple[Offsets, Offsets]:
    """(earliest, latest) per partition; latest is the last stable offset at read_committed,
    so a range never ends inside a transaction that is still undecided."""
    if not tps:
        return {}, {}
    keys = [TopicPartition(t, p) for t, p in tps]

    async def ask(c: Consumer) -> tuple[Offsets, Offsets]:
        return dict(await c.beginning_offsets(keys)), dict(await c.end_offsets(keys))

    return await _planner(opts, ask)


def discover(opts: SourceOptions) -> list[TopicPartition]:
    """Partitions the source reads now (subscribed topics can grow partitions between calls)."""
    if opts.assign:
        return list(opts.assign)
    topics = sorted(set(opts.topics))
    return sorted(runtime.run(_planner(opts, lambda c: c.partitions_for(topics))))


def bounds(opts: SourceOptions, tps: list[TopicPartition]) -> tuple[Offsets, Offsets]:
    return runtime.run(_bounds(opts, tps))


def _reader(opts: SourceOptions) -> Consumer:
    return Consumer(opts.bootstrap, isolation_level=opts.isolation_level, enable_auto_commit=False,
                    auto_offset_reset="earliest", fetch_max_wait_ms=100, max_partition_fetch_bytes=MAX_FETCH_BYTES,
                    security=opts.security)


async def _read_range(opts: SourceOptions, tp: TopicPartition, start: int, end: int, whole: bool
                      ) -> AsyncGenerator[Any, None]:
    """What offsets [start, end) of one partition hold, in offset order: FetchedBatches (`whole`)
    or lists of ConsumerRecords, all from the process's kept consumer.

    At read_committed, aborted records and transaction markers are never handed out but still
    occupy offsets, so the loop ends when the consumer's *position* reaches `end`, not when it has
    seen a record at end - 1 (which may not exist). A batch may reach past `end`: the caller cuts.
    """
    key = TopicPartition(*tp)
    cache = runtime.runtime().cache("reader", _close)
    ckey = (opts.bootstrap, opts.security, opts.isolation_level)
    c: Consumer | None = cache.take(ckey)
    if c is None:
        c = _reader(opts)
        await c.start()
    ok = False
    try:
        c.assign([key])
        c.seek(key, start)
        deadline = SYSTEM_CLOCK.monotonic() + opts.poll_timeout_ms / 1000
        while await c.position(key) < end:
            got: Any
            if whole:
                got = (await c.getmany_batches(key, timeout_ms=200)).get(key)
            else:
                got = [r for r in (await c.getmany(key, timeout_ms=200, max_records=CHUNK)).get(key, ())
                       if r.offset < end]
            if got:
                deadline = SYSTEM_CLOCK.monotonic() + opts.poll_timeout_ms / 1000
                yield got
            elif SYSTEM_CLOCK.monotonic() > deadline:
                raise ReadTimeout(f"{tp[0]}-{tp[1]}: stuck at offset {await c.position(key)}, "
                                  f"range ends at {end}")
        ok = True
    finally:
        if ok:
            c.assign([])  # stop fetching until the next task
            await cache.give_back(ckey, c)
        else:
            await cache.discard(c)


def read_range(opts: SourceOptions, tp: TopicPartition, start: int, end: int,
               convert: Callable[[list[Any]], Iterable[T]]) -> Iterator[T]:
    """Records [start, end) of one partition, converted chunk by chunk: the synchronous face of
    `_read_range` that Spark's read() can return from."""
    return _step(opts, tp, start, end, False, convert)


def read_batches(opts: SourceOptions, tp: TopicPartition, start: int, end: int,
                 convert: Callable[[FetchedBatches], Iterable[T]]) -> Iterator[T]:
    """As read_range, one fetch's batches at a time (for client.arrow.to_arrow)."""
    return _step(opts, tp, start, end, True, convert)


def _step(opts: SourceOptions, tp: TopicPartition, start: int, end: int, whole: bool,
          convert: Callable[[Any], Iterable[T]]) -> Iterator[T]:
    """Spark pulls rows from the iterator we return: the async generator is stepped on the loop
    one fetch at a time, and `convert` runs here, in the task's thread, while the consumer already
    fetches the next one."""
    if start >= end:
        return
    rt = runtime.runtime()
    agen = _read_range(opts, tp, start, end, whole)
    try:
        while True:
            try:
                got = rt.run(agen.__anext__())
            except StopAsyncIteration:
                break
            yield from convert(got)
    finally:
        rt.run(agen.aclose())
