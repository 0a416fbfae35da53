"""The simulator's event loop: virtual time, simulated processes, an inline executor.

Why a loop of our own and not hooks in the product: asyncio already routes every timer
(`call_at`), every callback (`call_soon`), every connection (`create_connection`,
`create_server`, `getaddrinfo`) and every thread hand-off (`run_in_executor`, which
`asyncio.to_thread` uses) through the loop object. Replacing the loop replaces all of them at
once, and the broker code above it runs unchanged (uvloop stays in production).

* **Time** is a number the loop moves: when nothing is ready it jumps to the next timer, so ten
  simulated minutes of heartbeats cost only the callbacks they run.
* **Processes.** Every callback carries the `contextvars.Context` it runs in; a process's tasks
  all inherit its `PROC` variable. A callback of a paused process is parked until it resumes
  (the zombie leader: its timers and its network input wait); one of a dead process is dropped,
  as SIGKILL drops a process's threads mid-step, without running its `finally` blocks.
* **Threads.** `run_in_executor` runs the function inline, later by a seeded delay (the disk's
  speed, or the worker threads' for the default executor), inside the caller's process: a dead
  process's pending disk work never happens.

Everything is decided by one `random.Random`, and callbacks run in a fixed order (FIFO, timers
by time then by scheduling order), so one seed gives one run.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import random
import selectors
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
GC_EVERY_STEPS = 100_000


class Deadlock(RuntimeError):
    """Nothing ready and no timer: every task waits on something that will never happen."""


class Livelock(RuntimeError):
    """Callbacks keep running and virtual time never moves: some loop of tasks wakes itself for
    ever (a real process would spin its CPU). A seed this happens to fails; it does not hang."""


LIVELOCK_TURNS = 2_000_000  # loop turns at one virtual instant (a whole 40-s seed takes about 300,000)


class Process:
    """One simulated OS process: a broker incarnation or a workload client."""

    __slots__ = ("name", "host", "alive", "paused", "parked", "context", "disk_delay", "worker_delay", "tasks")

    def __init__(self, name: str, host: str) -> None:
        self.name = name
        self.host = host  # its network address (one per simulated machine)
        self.alive = True
        self.paused = False
        self.parked: list[tuple[Callable[..., Any], tuple[Any, ...], contextvars.Context]] = []
        self.disk_delay = (0.0, 0.002)  # seconds an executor job takes: (min, max), seeded
        # if set, what a job of the default executor (asyncio.to_thread: decoding a log being
        # loaded) takes instead: a busy machine's worker threads, or a partition far larger than
        # the simulation's few KiB, without slowing the disk's own I/O threads
        self.worker_delay: tuple[float, float] | None = None
        self.context = contextvars.copy_context()
        self.context.run(PROC.set, self)
        self.tasks: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()

    def __repr__(self) -> str:
        state = "dead" if not self.alive else "paused" if self.paused else "up"
        return f"<Process {self.name} {state}>"


PROC: contextvars.ContextVar[Process | None] = contextvars.ContextVar("ketch_sim_process", default=None)


class _NoSelector(selectors.BaseSelector):
    """There is no I/O to wait for: `select` is where virtual time passes."""

    def __init__(self, loop: SimLoop) -> None:
        self._loop = loop
        self._map: dict[Any, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = selectors.SelectorKey(fileobj, 0, events, data)
        self._map[fileobj] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._map.pop(fileobj)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise Deadlock("no callback ready and no timer scheduled")
        loop = self._loop
        before = loop._now
        loop._advance(timeout)
        loop._reach_due_timers()
        if loop._now != before:
            loop.still = 0
        else:
            loop.still += 1
            if loop.still > loop.livelock_turns:
                raise Livelock(f"{loop.livelock_turns:,} loop turns at virtual time {before!r}")
        return []

    def get_map(self) -> Any:
        return self._map

    def close(self) -> None:
        self._map.clear()


class SimLoop(asyncio.BaseEventLoop):
    """See the module docstring. `net` (dst.net.SimNetwork) serves the connection calls."""

    def __init__(self, rng: random.Random, start: float = 1000.0) -> None:
        super().__init__()
        self.rng = rng
        self._now = start
        self._selector = _NoSelector(self)  # type: ignore[assignment]
        self.net: Any = None  # set by the network when it attaches
        self.errors: list[str] = []  # unhandled exceptions of live processes' callbacks
        self.steps = 0
        self.still = 0  # loop turns since virtual time last moved
        self.livelock_turns = LIVELOCK_TURNS
        # Tasks of killed processes, kept referenced: a pending coroutine that is garbage collected
        # is closed, which runs its `finally` blocks -- code a SIGKILLed process never runs.
        self.graveyard: list[asyncio.Task[Any]] = []
        self._queues: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()  # executor -> last job's time
        self.set_exception_handler(self._on_error)
        self.set_task_factory(self._task)

    # ---- time -------------------------------------------------------------------------------------
    def time(self) -> float:
        return self._now

    def _advance(self, seconds: float) -> None:
        if seconds > 0:
            self._now += seconds

    def _reach_due_timers(self) -> None:
        """Move time to the latest timer asyncio is about to run as due. It runs every timer within
        its clock's resolution (1 ns) of now, and while other callbacks are ready it does not ask
        the selector to wait first: a wait for a few units in the last place -- what
        `deadline - now` leaves -- woke with time standing still, found the same remainder and
        waited for it again, forever (seed 4796 at 120 s). A real clock would have moved past it."""
        heap = self._scheduled
        while heap and heap[0]._when < (bound := self._now + self._clock_resolution):
            latest, todo = self._now, [0]
            while todo:  # the heap's nodes below the bound: a parent is never later than its children
                i = todo.pop()
                if i < len(heap) and heap[i]._when < bound:
                    if not heap[i]._cancelled:
                        latest = max(latest, heap[i]._when)
                    todo += (2 * i + 1, 2 * i + 2)
            if latest <= self._now:
                return
            self._now = latest  # which may bring later timers within the resolution in turn

    # ---- asyncio's hooks the base class leaves to a selector loop ------------------------------------
    def _process_events(self, event_list: Any) -> None:
        pass

    def _write_to_self(self) -> None:
        pass  # no other thread ever wakes this loop

    # ---- processes -----------------------------------------------------------------------------------
    def call_soon(self, callback: Callable[..., Any], *args: Any,
                  context: contextvars.Context | None = None) -> asyncio.Handle:
        if context is None:
            context = contextvars.copy_context()
        proc = context.get(PROC)
        if proc is None:
            return super().call_soon(callback, *args, context=context)
        return super().call_soon(self._gated, proc, callback, args, context, context=context)

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any,
                context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        if context is None:
            context = contextvars.copy_context()
        proc = context.get(PROC)
        if proc is None:
            return super().call_at(when, callback, *args, context=context)
        return super().call_at(when, self._gated, proc, callback, args, context, context=context)

    def _gated(self, proc: Process, callback: Callable[..., Any], args: tuple[Any, ...],
               context: contextvars.Context) -> None:
        if not proc.alive:
            return
        if proc.paused:
            proc.parked.append((callback, args, context))
            return
        self.steps += 1
        if self.steps % GC_EVERY_STEPS == 0:
            gc.collect()  # at a step the seed decides, not when allocation counts say (run.py disables it)
        callback(*args)

    @staticmethod
    def _task(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kw)
        proc = PROC.get() if kw.get("context") is None else kw["context"].get(PROC)
        if proc is not None:
            proc.tasks.add(task)
        return task

    def spawn(self, proc: Process, coro: Coroutine[Any, Any, T], name: str | None = None) -> asyncio.Task[T]:
        """Start `coro` as a task of `proc` (everything it starts belongs to `proc` too)."""
        return self.create_task(coro, name=name, context=proc.context.copy())

    def pause(self, proc: Process) -> None:
        proc.paused = True

    def resume(self, proc: Process) -> None:
        proc.paused = False
        parked, proc.parked = proc.parked, []
        for callback, args, context in parked:
            super().call_soon(self._gated, proc, callback, args, context, context=context)

    def kill(self, proc: Process) -> None:
        """SIGKILL: nothing of `proc` runs again; its connections reset (the network's job)."""
        proc.alive = False
        proc.parked.clear()
        self.graveyard += [t for t in proc.tasks if not t.done()]
        if self.net is not None:
            self.net.process_died(proc)

    # ---- threads -------------------------------------------------------------------------------------
    def run_in_executor(self, executor: Any, func: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        fut: asyncio.Future[T] = self.create_future()
        proc = PROC.get()
        low, high = (0.0, 0.0) if proc is None else \
            proc.worker_delay if executor is None and proc.worker_delay else proc.disk_delay
        when = self._now + low + (high - low) * self.rng.random()
        if executor is not None:  # the product's own executors are single threads: first in, first done
            when = max(when, self._queues.get(executor, 0.0) + 1e-7)
            self._queues[executor] = when

        def work() -> None:
            if fut.cancelled():
                return
            try:
                result = func(*args)
            except BaseException as e:  # noqa: BLE001 - handed to the awaiting task, as a thread would
                fut.set_exception(e)
            else:
                fut.set_result(result)

        self.call_at(when, work)
        return fut

    def set_default_executor(self, executor: Any) -> None:
        pass

    # ---- network (dst.net) -------------------------------------------------------------------------
    async def create_connection(self, protocol_factory: Callable[[], asyncio.BaseProtocol],  # type: ignore[override]
                                host: str | None = None, port: int | None = None, **kw: Any) -> Any:
        assert host is not None and port is not None
        return await self.net.connect(protocol_factory, host, port)

    async def create_server(self, protocol_factory: Callable[[], asyncio.BaseProtocol],  # type: ignore[override]
                            host: Any = None, port: int | None = None, *, start_serving: bool = True,
                            **kw: Any) -> Any:
        return await self.net.listen(protocol_factory, host, port or 0, start_serving)

    async def getaddrinfo(self, host: Any, port: Any, **kw: Any) -> Any:  # type: ignore[override]
        return self.net.getaddrinfo(host, port)

    # ---- errors ------------------------------------------------------------------------------------
    def _on_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        message = context.get("message", "")
        if "was destroyed but it is pending" in message:
            return  # a killed process's tasks: never finished, never will
        proc = PROC.get()  # the handler runs in the failing callback's context
        if proc is not None and not proc.alive:
            return
        exc = context.get("exception")
        self.errors.append(f"{message}: {exc!r}" if exc is not None else message)

    def run_until(self, done: Callable[[], bool], until: float) -> None:
        """Run until `done()` or virtual time `until`, whichever first."""
        async def watch() -> None:
            while not done() and self._now < until:
                await asyncio.sleep(0.05)
        self.run_until_complete(watch())

    def pending_timers(self) -> int:
        return len(self._scheduled)


def new_loop(seed: int) -> SimLoop:
    loop = SimLoop(random.Random(seed))
    return loop


__all__ = ["PROC", "Deadlock", "Livelock", "Process", "SimLoop", "new_loop"]
