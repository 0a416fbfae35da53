"""The simulation's workload: the bundled asyncio client in the simulated world, writing a history
the chaos checker judges (tests/helpers/chaos/checker.py documents the format).

The same roles as the chaos campaign's librdkafka workload, so the same checker applies: idempotent
acks=all producers, transactional producers that abort a fifth of their transactions on purpose,
read_committed and read_uncommitted pollers reading every partition from the start, a
consume-transform-produce copier in a consumer group; then, after healing, a fresh read of each
topic, each partition's HW and LSO, and the copier's committed group offsets. Times are the loop's
(virtual, one clock for every process), so the checker's ordering of commits and polls holds.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

from client.consumer import Consumer
from client.errors import FatalError, KafkaClientError, RetriableError
from client.producer import Producer
from client.structs import TopicPartition

from .clock import SimClock
from .loop import Process, SimLoop

History = Callable[[dict[str, Any]], None]
TOPIC, COPY_IN, COPY_OUT = "mixed", "copy-in", "copy-out"
COPIER_GROUP = "copier"


class Worker:
    """One client application (its own simulated process and host), restarted as a new
    incarnation after an error its client cannot go on from."""

    def __init__(self, sim: Workload, name: str) -> None:
        self.sim = sim
        self.name = name
        self.rng = random.Random(sim.rng.getrandbits(64))
        self.errors: dict[str, int] = {}
        self.halt = False

    @property
    def loop(self) -> SimLoop:
        return self.sim.loop

    def clock(self) -> SimClock:
        return self.sim.clock

    def note(self, where: str, exc: BaseException) -> None:
        key = f"{where}:{type(exc).__name__}"
        self.errors[key] = self.errors.get(key, 0) + 1

    async def run(self) -> None:
        inc = 0
        while not self.halt:
            inc += 1
            try:
                await self.incarnation(inc)
            except (KafkaClientError, OSError, TimeoutError) as e:
                self.note("incarnation", e)
                await asyncio.sleep(0.5)

    async def incarnation(self, inc: int) -> None:
        raise NotImplementedError


class PlainProducer(Worker):
    async def incarnation(self, inc: int) -> None:
        sim = self.sim
        p = Producer(sim.bootstrap, client_id=self.name, enable_idempotence=True, acks="all", linger_ms=2,
                     request_timeout_ms=10_000, delivery_timeout_ms=30_000, clock=self.clock())
        await p.start()
        pending: list[asyncio.Task[None]] = []
        seq = 0
        try:
            while not self.halt:
                seq += 1
                part = self.rng.randrange(sim.partitions)
                value = f"{self.name}-{inc}-{seq}"
                op = {"f": "send", "proc": self.name, "inc": inc, "seq": seq, "topic": TOPIC,
                      "partition": part, "value": value, "t0": self.loop.time()}
                fut = await p.send(TOPIC, value.encode(), partition=part)
                pending.append(self.loop.create_task(self._ack(op, fut)))
                await asyncio.sleep(self.rng.uniform(0.005, 0.05) / sim.intensity)
        finally:
            try:
                await asyncio.wait_for(p.flush(), 30)
            except (KafkaClientError, TimeoutError) as e:
                self.note("flush", e)
            await asyncio.gather(*pending, return_exceptions=True)
            await p.close(timeout=5)

    async def _ack(self, op: dict[str, Any], fut: asyncio.Future[Any]) -> None:
        try:
            md = await fut
            op.update(status="ok", offset=md.offset)
        except (KafkaClientError, OSError, TimeoutError) as e:
            op.update(status="info", offset=None, error=type(e).__name__)
            self.note("deliver", e)
        op["t1"] = self.loop.time()
        self.sim.write(op)


class TxnProducer(Worker):
    def __init__(self, sim: Workload, name: str, tid: str) -> None:
        super().__init__(sim, name)
        self.tid = tid

    async def incarnation(self, inc: int) -> None:
        sim = self.sim
        p = Producer(sim.bootstrap, client_id=self.name, transactional_id=self.tid,
                     transaction_timeout_ms=sim.txn_timeout_ms, linger_ms=2, request_timeout_ms=10_000,
                     delivery_timeout_ms=30_000, clock=self.clock())
        await p.start()
        try:
            await asyncio.wait_for(p.init_transactions(), 60)
            seq = 0
            while not self.halt:
                seq += 1
                if not await self._transaction(p, inc, seq):
                    return
                await asyncio.sleep(self.rng.uniform(0.01, 0.1) / sim.intensity)
        finally:
            await p.close(timeout=5)

    async def _transaction(self, p: Producer, inc: int, seq: int) -> bool:
        sends: list[dict[str, Any]] = []
        op: dict[str, Any] = {"f": "txn", "proc": self.name, "inc": inc, "seq": seq, "topic": TOPIC,
                              "sends": sends, "tc": None, "t0": self.loop.time()}
        abort = self.rng.random() < 0.2
        keep = True
        try:
            await p.begin_transaction()
            futs = []
            for i in range(self.rng.randint(1, 4)):
                send = {"partition": self.rng.randrange(self.sim.partitions),
                        "value": f"{self.name}-{inc}-{seq}-{i}", "offset": None}
                sends.append(send)
                futs.append((send, await p.send(TOPIC, send["value"].encode(), partition=send["partition"])))
            await asyncio.wait_for(p.flush(), 30)
            for send, fut in futs:
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    send["offset"] = fut.result().offset
            op["tc"] = self.loop.time()
            if abort:
                await asyncio.wait_for(p.abort_transaction(), 30)
                op["outcome"] = "abort"
            else:
                await asyncio.wait_for(p.commit_transaction(), 30)
                op["outcome"] = "commit"
        except (KafkaClientError, OSError, TimeoutError) as e:
            self.note("txn", e)
            op["outcome"], keep = "info", False
            if not isinstance(e, FatalError | TimeoutError):
                try:
                    await asyncio.wait_for(p.abort_transaction(), 30)
                    op["outcome"], keep = "abort", True
                except (KafkaClientError, OSError, TimeoutError) as e2:
                    self.note("abort", e2)
        op["t1"] = self.loop.time()
        self.sim.write(op)
        return keep


def _error_name(e: BaseException) -> str:
    """Kafka's name for the error a broker answered, else the exception's class."""
    code = getattr(e, "code", None)
    return code.name if code is not None else type(e).__name__


class Zombie(Worker):
    """A transactional producer that goes on after another instance of its transactional id
    fenced it (a process presumed dead that was only paused): every write and the commit it sends
    under the old epoch must be refused. Recorded as the checker's `fence` line."""

    async def incarnation(self, inc: int) -> None:
        sim, tid = self.sim, f"sim-zombie-{inc}"
        kw: dict[str, Any] = dict(transactional_id=tid, transaction_timeout_ms=sim.txn_timeout_ms, linger_ms=0,
                                  request_timeout_ms=10_000, delivery_timeout_ms=20_000, clock=self.clock())
        old, new = Producer(sim.bootstrap, client_id=f"{self.name}-old", **kw), \
            Producer(sim.bootstrap, client_id=f"{self.name}-new", **kw)
        await old.start()
        await new.start()
        try:
            await asyncio.wait_for(old.init_transactions(), 60)
            await old.begin_transaction()
            part = self.rng.randrange(sim.partitions)
            first = {"partition": part, "value": f"{self.name}-{inc}-0-0", "offset": None}
            first["offset"] = (await asyncio.wait_for(await old.send(TOPIC, first["value"].encode(), partition=part),
                                                      30)).offset
            assert old.txn is not None
            pid, epoch = old.txn.producer_id, old.txn.producer_epoch
            await asyncio.wait_for(new.init_transactions(), 60)  # fences `old`, aborts its transaction
            assert new.txn is not None
            t = self.loop.time()
            # the aborted transaction, for the checker: its value must never be read committed
            sim.write({"f": "txn", "proc": self.name, "inc": inc, "seq": 0, "topic": TOPIC, "sends": [first],
                       "outcome": "abort", "tc": None, "t0": t, "t1": t})
            writes = []
            for i in range(1, 3):
                w: dict[str, Any] = {"partition": part, "value": f"{self.name}-{inc}-1-{i}", "t0": self.loop.time(),
                                     "error": None, "offset": None}
                try:
                    md = await asyncio.wait_for(await old.send(TOPIC, w["value"].encode(), partition=part), 30)
                    w.update(error="NONE", offset=md.offset)
                except (KafkaClientError, OSError, TimeoutError) as e:
                    w["error"] = _error_name(e)
                writes.append(w)
            commit: str | None = None
            try:
                await asyncio.wait_for(old.commit_transaction(), 30)
                commit = "NONE"
            except (KafkaClientError, OSError, TimeoutError) as e:
                commit = _error_name(e)
            sim.write({"f": "fence", "proc": self.name, "topic": TOPIC, "tid": tid, "pid": pid, "epoch": epoch, "by": new.txn.producer_epoch,
                       "t": t, "writes": writes, "commit": commit})
        finally:
            await old.close(timeout=5)
            await new.close(timeout=5)
        await asyncio.sleep(self.rng.uniform(1.0, 3.0))


class Poller(Worker):
    def __init__(self, sim: Workload, name: str, isolation: str) -> None:
        super().__init__(sim, name)
        self.isolation = isolation

    async def incarnation(self, inc: int) -> None:
        sim = self.sim
        c = Consumer(sim.bootstrap, client_id=self.name, isolation_level=self.isolation,
                     enable_auto_commit=False, auto_offset_reset="earliest",
                     request_timeout_ms=10_000, clock=self.clock())
        await c.start()
        try:
            tps = [TopicPartition(TOPIC, p) for p in range(sim.partitions)]
            c.assign(tps)
            c.seek_to_beginning(*tps)
            while not self.halt:
                t0 = self.loop.time()
                got = await c.getmany(timeout_ms=500)
                t1 = self.loop.time()
                recs = [[r.partition, r.offset, r.value.decode()] for tp in sorted(got) for r in got[tp]
                        if r.value is not None]
                if recs:
                    sim.write({"f": "poll", "proc": self.name, "inc": inc, "iso": self.isolation,
                               "topic": TOPIC, "recs": recs, "t0": t0, "t1": t1})
        except RetriableError as e:
            self.note("poll", e)
        finally:
            await c.close()


class Workload:
    """The clients of one simulated run, each a process of its own on a client host."""

    def __init__(self, loop: SimLoop, bootstrap: str, seed: int, history: History, *, partitions: int = 3,
                 txn_timeout_ms: int = 10_000, intensity: float = 1.0) -> None:
        self.loop = loop
        self.intensity = intensity  # 1: about 70 sends and 20 transactions a second; the cost of a run scales with it
        self.bootstrap = bootstrap
        self.rng = random.Random(seed)
        self.write = history
        self.partitions = partitions
        self.txn_timeout_ms = txn_timeout_ms
        self.clock = SimClock(loop)
        self.workers: list[Worker] = [
            PlainProducer(self, "p1"), PlainProducer(self, "p2"),
            TxnProducer(self, "t1", "sim-t1"), TxnProducer(self, "t2", "sim-t2"),
            Poller(self, "rc1", "read_committed"), Poller(self, "ru1", "read_uncommitted"),
            Zombie(self, "z1"),
        ]
        self.procs: list[Process] = []
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self.write({"f": "meta", "topic": TOPIC, "partitions": self.partitions, "txn_timeout_ms": self.txn_timeout_ms})
        for i, w in enumerate(self.workers):
            proc = Process(f"client-{w.name}", f"10.0.1.{i + 1}")
            self.procs.append(proc)
            self.tasks.append(self.loop.spawn(proc, w.run(), name=w.name))

    async def stop(self) -> None:
        for w in self.workers:
            w.halt = True
        await asyncio.wait(self.tasks, timeout=90)

    async def settle(self) -> None:
        """After healing: a fresh read of the topic, and HW/LSO once transactions had time to end."""
        proc = Process("client-final", "10.0.1.100")
        await self.loop.spawn(proc, self._settle())

    async def _settle(self) -> None:
        offsets = await self._offsets()
        for iso in ("read_committed", "read_uncommitted"):
            self.write(await self._final_read(iso))
        for p in range(self.partitions):
            hw, lso = offsets.get(p, (-1, -1))
            self.write({"f": "offsets", "topic": TOPIC, "partition": p, "hw": hw, "lso": lso})

    async def _offsets(self) -> dict[int, tuple[int, int]]:
        deadline = self.loop.time() + 2 * self.txn_timeout_ms / 1000 + 30
        tps = [TopicPartition(TOPIC, p) for p in range(self.partitions)]
        out: dict[int, tuple[int, int]] = {}
        ru = Consumer(self.bootstrap, isolation_level="read_uncommitted", request_timeout_ms=10_000, clock=self.clock)
        rc = Consumer(self.bootstrap, isolation_level="read_committed", request_timeout_ms=10_000, clock=self.clock)
        await ru.start()
        await rc.start()
        try:
            while self.loop.time() < deadline:
                try:
                    hw = await ru.end_offsets(tps)
                    lso = await rc.end_offsets(tps)
                except (KafkaClientError, OSError, TimeoutError):
                    await asyncio.sleep(0.5)
                    continue
                out = {tp.partition: (hw[tp], lso[tp]) for tp in tps}
                if all(lso[tp] >= hw[tp] for tp in tps):
                    break
                await asyncio.sleep(0.5)
        finally:
            await ru.close()
            await rc.close()
        return out

    async def _final_read(self, isolation: str) -> dict[str, Any]:
        deadline = self.loop.time() + 60
        tps = [TopicPartition(TOPIC, p) for p in range(self.partitions)]
        c = Consumer(self.bootstrap, isolation_level=isolation, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                     request_timeout_ms=10_000, clock=self.clock)
        await c.start()
        recs: list[list[Any]] = []
        ends: dict[int, int] = {}
        complete = False
        try:
            while not ends and self.loop.time() < deadline:
                try:
                    ends = {tp.partition: o for tp, o in (await c.end_offsets(tps)).items()}
                except (KafkaClientError, OSError, TimeoutError):
                    await asyncio.sleep(0.5)
            if isolation == "read_committed":  # read up to the HW, as the librdkafka workload does
                hwc = Consumer(self.bootstrap, isolation_level="read_uncommitted", request_timeout_ms=10_000,
                               clock=self.clock)
                await hwc.start()
                try:
                    ends = {tp.partition: o for tp, o in (await hwc.end_offsets(tps)).items()}
                finally:
                    await hwc.close()
            c.assign(tps)
            c.seek_to_beginning(*tps)
            while self.loop.time() < deadline:
                pos = {tp.partition: await c.position(tp) for tp in tps}
                if all(ends.get(p, 0) == 0 or pos[p] >= ends[p] for p in range(self.partitions)):
                    complete = True
                    break
                got = await c.getmany(timeout_ms=500)
                recs += [[r.partition, r.offset, r.value.decode()] for tp in sorted(got) for r in got[tp]
                         if r.value is not None]
        except (KafkaClientError, OSError, TimeoutError):
            pass
        finally:
            await c.close()
        return {"f": "final-read", "iso": isolation, "topic": TOPIC, "recs": recs,
                "ends": {str(p): e for p, e in ends.items()}, "complete": complete}
