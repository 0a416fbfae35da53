"""One simulated run: a seed in, a verdict and a replayable trace out.

`simulate(seed)` builds the world (a SimLoop, its network, N brokers on simulated disks), starts
the workload, lets the nemesis break things for `seconds` of virtual time, heals, lets the cluster
settle, and judges: the chaos checker on the history, the invariants on the brokers' state, and
every unhandled exception of a live process. Everything random comes from the seed — the loop's
choices, the workload's, the nemesis's, the ids the brokers draw (uuid4 and the random module are
seeded for the run) — so the same seed gives the same trace, byte for byte, in any process with
the same PYTHONHASHSEED (`python -m tests.helpers.dst` sets it).
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import logging
import random
import sys
import tempfile
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from broker.server import BrokerServer
from broker.txn.sender import REQUEST_TIMEOUT_S as MARKER_REQUEST_TIMEOUT_S
from storage import faults
from storage.fs import OS_FS
from storage.txn_index import TransactionIndex
from tests.helpers.chaos import checker

from .clock import SimClock
from .cluster import SimCluster
from .disk import SimFileSystem
from .invariants import Invariants, compare_replicas, prepared
from .loop import PROC, Deadlock, SimLoop
from .nemesis import KINDS, Nemesis
from .net import SimNetwork
from .workload import COPY_IN, COPY_OUT, PAIR, TOPIC, Workload

INVARIANT_EVERY_S = 0.1
MARKER_SLACK_S = 10.0  # past a marker request's timeout: its retry's backoff, the new leaders' answers
# Log fields that time the broker's own code with perf_counter (real time, not virtual): left out of
# the trace, which must be the same in every run of a seed.
MEASURED = {("consumer groups loaded", "seconds"), ("replica moved to another log directory", "swap_ms")}
START_TIMEOUT_S = 60.0
HEAL_TIMEOUT_S = 120.0


@dataclass
class Result:
    seed: int
    seconds: float
    history: list[str]
    trace: list[str]
    report: checker.Report | None
    violations: list[str]
    errors: list[str]
    virtual_s: float = 0.0
    steps: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    progress: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (self.report is not None and self.report.ok) and not self.violations and not self.errors

    def digest(self) -> str:
        h = hashlib.sha256()
        for line in self.history + self.trace:
            h.update(line.encode())
            h.update(b"\n")
        return h.hexdigest()[:16]

    def summary(self) -> str:
        anomalies = {k: v for k, v in self.report.counts.items() if v} if self.report is not None else {}
        verdict = "ok" if self.ok else "FAIL"
        problems = []
        if self.report is not None and not self.report.ok:
            problems.append(self.report.render().splitlines()[0] if self.report.render() else "anomalies")
        problems += self.violations[:3] + self.errors[:3]
        return (f"seed {self.seed}: {verdict} ({self.virtual_s:.0f} virtual s, {self.steps} steps, "
                f"faults {self.faults}, progress {self.progress}{', ' + str(anomalies) if anomalies else ''})"
                + ("".join(f"\n  {p}" for p in problems)))


@contextmanager
def seeded_ids(seed: int) -> Iterator[None]:
    """uuid4 and the random module drawn from the seed for the run (topic ids, incarnations,
    member ids, fetch session ids, the client's partitioner and backoff jitter)."""
    rng = random.Random(seed ^ 0x5EED)
    original = uuid.uuid4
    state = random.getstate()
    uuid.uuid4 = lambda: uuid.UUID(int=rng.getrandbits(128), version=4)  # type: ignore[assignment]
    random.seed(seed)
    try:
        yield
    finally:
        uuid.uuid4 = original  # type: ignore[assignment]
        random.setstate(state)


@contextmanager
def collected() -> Iterator[None]:
    """Garbage collection only at steps the seed decides (SimLoop), and the run's garbage gone
    before the next run: a coroutine closed by the collector runs its `finally` blocks, which may
    draw from the random module -- in the middle of another run, that would change its course."""
    enabled = gc.isenabled()
    gc.disable()
    # Everything alive before the run (modules, codec caches, the test runner's own objects) is set
    # aside: no collection in the run looks at it, so each one costs what the run allocated, not
    # the whole process's heap -- and what was garbage before the run stays uncollected, so none of
    # its finalizers can run in the middle of the run.
    gc.freeze()
    try:
        yield
    finally:
        for t in threading.enumerate():  # the killed brokers' loop watchdogs hold their worlds until they end
            if t.name == "loop-watch":
                t.join(5)
        # A process-wide cache (one per broker process in production) that every simulated broker
        # shares: only a cache (the index file is the truth), but it would keep this run's disks alive.
        TransactionIndex._cached.clear()
        _collect()
        gc.unfreeze()
        if enabled:
            gc.enable()


def _drop(*_: Any) -> Any:
    raise structlog.DropEvent


def _collect() -> None:
    """A collection that does not report what the closed loop's coroutines complain of as they go:
    closing a killed process's pending coroutines runs their `finally` blocks -- code SIGKILL never
    runs -- and what they raise or log is the harness's noise, not the run's."""
    hook, sys.unraisablehook = sys.unraisablehook, lambda _: None
    structlog.configure(processors=[_drop])
    try:
        with warnings.catch_warnings():  # a killed process's tasks that never took their first step
            warnings.simplefilter("ignore", RuntimeWarning)
            gc.collect()
    finally:
        sys.unraisablehook = hook
        structlog.reset_defaults()


@contextmanager
def broken(names: str) -> Iterator[None]:
    """The chaos suite's break switches (storage/faults.py), set for this run only."""
    wanted = frozenset(n for n in names.split(",") if n)
    unknown = wanted - faults.GUARANTEES.keys()
    if unknown:
        raise ValueError(f"unknown break switch(es) {sorted(unknown)}; known: {sorted(faults.GUARANTEES)}")
    before, faults.BROKEN = faults.BROKEN, wanted
    try:
        yield
    finally:
        faults.BROKEN = before


def _quiet_logs(loop: SimLoop, trace: list[str] | None) -> None:
    """The brokers' structlog output: dropped, or with `trace`, kept with virtual time and process."""
    def to_trace(_: Any, method: str, event: dict[str, Any]) -> Any:
        if trace is not None and threading.current_thread() is threading.main_thread():  # not a watchdog's
            proc = PROC.get()
            msg = event.pop("event", "")
            rest = " ".join(f"{k}={v}" for k, v in sorted(event.items())
                            if k not in ("timestamp", "logger") and (msg, k) not in MEASURED)
            trace.append(f"{loop.time():10.4f} {proc.name if proc else '-':<14} log {method}: {msg} {rest}")
        raise structlog.DropEvent

    level = logging.DEBUG if trace is not None else logging.ERROR
    structlog.configure(processors=[to_trace], wrapper_class=structlog.make_filtering_bound_logger(level),
                        cache_logger_on_first_use=False)


def simulate(seed: int, seconds: float = 30.0, *, size: int = 3, logs: bool = False,
             disk: str = "sim", breaks: str = "", intensity: float = 1.0,
             faults: tuple[str, ...] = KINDS) -> Result:
    with collected(), seeded_ids(seed), broken(breaks), tempfile.TemporaryDirectory(prefix="ketch-sim-") as tmp:
        try:
            return _run(seed, seconds, size, logs, disk, Path(tmp), intensity, faults)  # its frame, and the world, gone before collecting
        finally:
            structlog.reset_defaults()  # its processor holds the run's loop


def _run(seed: int, seconds: float, size: int, logs: bool, disk: str, tmp: Path, intensity: float,
         faults: tuple[str, ...]) -> Result:
    history: list[str] = []
    trace: list[str] = []
    loop = SimLoop(random.Random(seed))
    SimNetwork(loop)

    def note(*what: Any) -> None:
        trace.append(f"{loop.time():10.4f} {'sim':<14} " + " ".join(str(w) for w in what))

    def write(op: dict[str, Any]) -> None:
        history.append(json.dumps(op, sort_keys=True))

    _quiet_logs(loop, trace if logs else None)
    make_fs, root = _disks(disk, tmp)
    cluster = SimCluster(loop, size, make_fs, trace=note, root=root)
    invariants = Invariants()
    workload = Workload(loop, cluster.bootstrap, seed, write, intensity=intensity)
    nemesis = Nemesis(cluster, random.Random(seed * 7 + 1), note, faults, apps=lambda: workload.procs,
                      txn_apps=workload.transactional)
    report = None
    try:
        asyncio.set_event_loop(loop)
        cluster.start_all()
        loop.run_until(cluster.settled, loop.time() + START_TIMEOUT_S)
        if not cluster.settled():
            raise RuntimeError(f"the cluster did not start in {START_TIMEOUT_S:.0f} virtual s")
        note("cluster serving")
        watch = loop.create_task(_watch(loop, cluster, invariants))
        loop.run_until_complete(_create_topics(loop, cluster, workload))
        workload.start()
        loop.run_until_complete(nemesis.run(seconds))
        nemesis.heal()
        healed_at = loop.time()
        loop.run_until(cluster.all_serving, loop.time() + HEAL_TIMEOUT_S)
        if not cluster.all_serving():
            invariants.fail(loop.time(), f"not every broker serving {HEAL_TIMEOUT_S:.0f} s after healing: "
                            f"{[n for n, node in cluster.nodes.items() if not node.serving]}")
        loop.run_until_complete(workload.stop())
        for task in workload.tasks:  # an application that died of an error its client should not raise
            if task.done() and (task.cancelled() or task.exception() is not None):  # nothing cancels them
                why = "CancelledError" if task.cancelled() else repr(task.exception())
                loop.errors.append(f"workload {task.get_name()} died: {why}")
        loop.errors += [f"workload {u}" for u in workload.unexpected]
        loop.run_until_complete(workload.settle())
        # A marker request in flight to a broker that died behind a cut link is not answered: the
        # coordinator learns only when it times out (30 s, as Kafka's inter-broker requests), and
        # only then sends the markers again to the partitions' new leaders (seed 5116 at 120 s).
        loop.run_until(lambda: not prepared(_live(cluster)), healed_at + MARKER_REQUEST_TIMEOUT_S + MARKER_SLACK_S)
        watch.cancel()
        invariants.check_settled(loop.time(), _live(cluster))
        invariants.check_markers(loop.time(), [(node.fs, cluster.data_dir(n)) for n, node in cluster.nodes.items()])
        for topic in (TOPIC, PAIR):
            write(_replicas(cluster, workload, invariants, loop.time(), topic))
        report = checker.check(checker.parse(history))
    except Deadlock as e:
        loop.errors.append(f"deadlock: {e}")
    finally:
        for n, node in cluster.nodes.items():
            if node.up:
                cluster.kill(n)
        for proc in workload.procs:
            loop.kill(proc)
        asyncio.set_event_loop(None)
        loop.close()
    return Result(seed, seconds, history, trace, report, invariants.violations, list(loop.errors),
                  virtual_s=loop.time() - 1000.0, steps=loop.steps, faults=dict(nemesis.counts),
                  progress=_progress(history))


def _progress(history: list[str]) -> dict[str, int]:
    out = {"acked": 0, "committed": 0, "aborted": 0}
    for line in history:
        op = json.loads(line)
        if op["f"] == "send" and op.get("status") == "ok":
            out["acked"] += 1
        elif op["f"] == "txn":
            if op.get("outcome") == "commit":
                out["committed"] += 1
            elif op.get("outcome") == "abort":
                out["aborted"] += 1
    return out


def _disks(kind: str, tmp: Path) -> tuple[Callable[[int, SimClock], Any], Path]:
    """Each machine's disk: simulated (power loss drops what was not synced), or the real file
    system under a temporary directory (a crash is only a process kill)."""
    if kind == "os":
        return (lambda n, clock: OS_FS), tmp
    return (lambda n, clock: SimFileSystem(now_ms=clock.now_ms)), Path("/sim")


def _replicas(cluster: SimCluster, workload: Workload, invariants: Invariants, now: float,
              topic: str) -> dict[str, Any]:
    """The end-of-run comparison of every replica of a workload topic, as a history line."""
    hws: dict[int, int] = {p: -1 for p in range(workload.partitions)}
    for node in cluster.nodes.values():
        t = node.broker.topics.get(topic) if node.up and node.broker is not None else None
        for index, part in (t.local.items() if t is not None else ()):
            if part.is_leader:
                hws[index] = part.high_watermark
    replicas = [(n, node.fs, cluster.data_dir(n)) for n, node in cluster.nodes.items()]
    return compare_replicas(topic, hws, replicas, lambda what: invariants.fail(now, what))


async def _watch(loop: SimLoop, cluster: SimCluster, invariants: Invariants) -> None:
    while True:
        await asyncio.sleep(INVARIANT_EVERY_S)
        invariants.check(loop.time(), _live(cluster))


def _live(cluster: SimCluster) -> list[tuple[int, int, BrokerServer]]:
    """(node id, incarnation, server) of every live broker, as the invariants take them."""
    return [(n, node.incarnation, node.broker) for n, node in cluster.nodes.items()
            if node.up and node.broker is not None]


async def _create_topics(loop: SimLoop, cluster: SimCluster, workload: Workload) -> None:
    from client.admin import Admin, NewTopic
    from client.errors import TopicAlreadyExistsError

    from .loop import Process
    proc = Process("client-admin", "10.0.1.200")

    async def create() -> None:
        """Every topic made with its partitions before any client can auto-create it with one."""
        admin = Admin(cluster.bootstrap, clock=workload.clock)
        await admin.start()
        wanted = {TOPIC: 3, COPY_IN: 3, COPY_OUT: 3, PAIR: 2}  # PAIR: a topic on two of the brokers
        deadline = loop.time() + START_TIMEOUT_S
        try:
            while wanted:
                result = await admin.create_topics([NewTopic(t, workload.partitions, min(rf, cluster.size))
                                                    for t, rf in sorted(wanted.items())])
                for name, error in result.items():
                    if error is None or isinstance(error, TopicAlreadyExistsError):
                        wanted.pop(name, None)
                if wanted and loop.time() > deadline:
                    raise RuntimeError(f"topics {sorted(wanted)} not created: {result}")
                if wanted:
                    await asyncio.sleep(0.5)
        finally:
            await admin.close()

    await loop.spawn(proc, create())
