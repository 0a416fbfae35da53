"""pipeline/runtime.py: the per-process loop thread and the client caches on it (no Spark, no broker)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pipeline.runtime import ClientCache, Runtime


class FakeClient:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False


async def close(c: FakeClient) -> None:
    c.closed = True


async def test_least_recently_used_clients_are_closed_beyond_capacity_and_taken_ones_are_out() -> None:
    cache: ClientCache[FakeClient] = ClientCache(close, capacity=2)
    a, b, c = FakeClient("a"), FakeClient("b"), FakeClient("c")
    await cache.give_back("a", a)
    await cache.give_back("b", b)
    assert cache.take("a") is a and cache.take("a") is None, "a task holds its client alone"
    await cache.give_back("a", a)  # now b is the least recently used
    await cache.give_back("c", c)
    assert b.closed and not a.closed and not c.closed
    assert cache.idle() == [a, c]
    replaced = FakeClient("a2")
    await cache.give_back("a", replaced)
    assert a.closed and cache.idle() == [c, replaced]
    await cache.close()
    assert c.closed and replaced.closed and cache.idle() == []


def test_run_executes_on_the_loop_thread_and_raises_there_errors_here() -> None:
    rt = Runtime()
    try:
        async def where() -> str:
            return threading.current_thread().name

        assert rt.run(where()) == "ketch-pipeline-loop" != threading.current_thread().name

        async def boom() -> None:
            raise ValueError("from the loop")

        with pytest.raises(ValueError, match="from the loop"):
            rt.run(boom())
        closed: list[str] = []

        async def close_it(c: FakeClient) -> None:
            closed.append(c.name)

        async def keep() -> None:
            await rt.cache("x", close_it).give_back("k", FakeClient("kept"))

        rt.run(keep())
    finally:
        rt.close()
    assert closed == ["kept"], "closing the runtime closes what its caches keep"
    assert not rt.thread.is_alive()
    with pytest.raises(RuntimeError):
        rt.run(asyncio.sleep(0))
