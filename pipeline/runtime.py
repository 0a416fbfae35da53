"""One event loop per Python process, on a background thread, and the clients that live on it.

Spark calls the data source synchronously, and reuses a Python worker process for task after task
and micro-batch after micro-batch (spark.python.worker.reuse, on by default). Starting an event
loop, connecting, fetching metadata, finding coordinators and initialising a transactional
producer for every task cost more than a small micro-batch's records; so each process keeps one
loop running on a daemon thread, and the clients made on it stay for the next task:

* the source's consumer (one per bootstrap and isolation level; each task assigns its partition);
* the planner's consumer (the driver-side runner asks it for partitions and offsets every
  micro-batch), and the sink's admin client;
* the sink's transactional producers and marker readers, per transactional id (exactly_once.py
  says when one may be reused, and drops it otherwise), at most `CAPACITY` of them, least
  recently used closed first.

`run()` hands a coroutine to the loop and blocks until it is done. The thread is a daemon and the
clients are closed at interpreter exit; Spark's daemon ends reused workers with os._exit, which
skips that, and then the broker sees the connections drop: nothing is lost, because no
transaction is ever left open between tasks.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
C = TypeVar("C")

CAPACITY = 32
CLOSE_TIMEOUT_S = 10.0


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency of the project
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()  # type: ignore[no-any-return]


class ClientCache(Generic[C]):
    """Clients by key, least recently used first; used only on the runtime's loop.

    `take()` removes the client while a task uses it: a task that fails never `give_back()`s it,
    so nothing that failed midway is ever handed to the next task.
    """

    def __init__(self, close: Callable[[C], Awaitable[None]], capacity: int = CAPACITY) -> None:
        self._idle: OrderedDict[Hashable, C] = OrderedDict()
        self._close = close
        self.capacity = capacity

    def take(self, key: Hashable) -> C | None:
        return self._idle.pop(key, None)

    async def give_back(self, key: Hashable, client: C) -> None:
        old = self._idle.pop(key, None)
        self._idle[key] = client
        if old is not None and old is not client:
            await self._quietly_close(old)
        while len(self._idle) > self.capacity:
            _, evicted = self._idle.popitem(last=False)
            await self._quietly_close(evicted)

    async def discard(self, client: C) -> None:
        await self._quietly_close(client)

    async def close(self) -> None:
        while self._idle:
            _, client = self._idle.popitem()
            await self._quietly_close(client)

    def idle(self) -> list[C]:
        """The clients waiting for their next task, least recently used first."""
        return list(self._idle.values())

    async def _quietly_close(self, client: C) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._close(client), CLOSE_TIMEOUT_S)


class Runtime:
    """The loop thread of this process and the caches of clients bound to its loop."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = _new_loop()
        self.caches: dict[str, ClientCache[Any]] = {}
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(ready.set)
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, name="ketch-pipeline-loop", daemon=True)
        self.thread.start()
        ready.wait()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the loop and return its result (or raise its exception) in this thread."""
        if threading.current_thread() is self.thread or self.loop.is_closed():
            coro.close()
            raise RuntimeError("Runtime.run() on the runtime's own loop, or after close()")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def cache(self, name: str, close: Callable[[Any], Awaitable[None]]) -> ClientCache[Any]:
        """The process's cache called `name` (made on first use): only touch it on the loop."""
        got = self.caches.get(name)
        if got is None:
            got = self.caches[name] = ClientCache(close)
        return got

    def close(self) -> None:
        async def close_all() -> None:
            for cache in list(self.caches.values()):
                await cache.close()

        if self.loop.is_closed() or not self.thread.is_alive():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close_all(), self.loop).result(CLOSE_TIMEOUT_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(CLOSE_TIMEOUT_S)
        if not self.thread.is_alive():
            self.loop.close()


_runtime: Runtime | None = None
_lock = threading.Lock()


def runtime() -> Runtime:
    """This process's runtime; a forked child gets its own (threads do not survive a fork)."""
    global _runtime
    rt = _runtime
    if rt is not None and rt.pid == os.getpid() and not rt.loop.is_closed():
        return rt
    with _lock:
        if _runtime is None or _runtime.pid != os.getpid() or _runtime.loop.is_closed():
            _runtime = Runtime()
        return _runtime


def run(coro: Coroutine[Any, Any, T]) -> T:
    return runtime().run(coro)


@atexit.register
def _close_at_exit() -> None:
    rt = _runtime
    if rt is not None and rt.pid == os.getpid():
        rt.close()
