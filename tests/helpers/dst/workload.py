"""The simulation's workload: the bundled asyncio client in the simulated world, writing a history
the chaos checker judges (tests/helpers/chaos/checker.py documents the format).

The same roles as the chaos campaign's librdkafka workload, so the same checker applies: idempotent
acks=all producers (one of them on PAIR, a topic on two of the three brokers), transactional producers that abort a fifth of their transactions on purpose,
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
from client.errors import FatalError, KafkaClientError, ProducerFencedError, RetriableError
from client.producer import Producer
from client.structs import TopicPartition
from protocol.errors import ErrorCode
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.records import Record, build_batch

from .clock import SimClock
from .loop import Process, SimLoop

History = Callable[[dict[str, Any]], None]
TOPIC, COPY_IN, COPY_OUT = "mixed", "copy-in", "copy-out"
# On two of the three brokers, with min.insync.replicas 2 as everywhere: a partition whose
# follower stalls has its leader as the only in-sync replica while the quorum (every broker) lives
# on -- the state of issue 23's sole-ISR restart, which a topic on every broker cannot reach.
PAIR = "pair"
COPIER_GROUP = "copier"
COPIER_ID = "sim-copier"  # the copier's transactional id
DRAIN_S = 120.0  # virtual seconds the copier gets to copy the rest of its input after the faults


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
        if isinstance(exc, FatalError) and not isinstance(exc, ProducerFencedError):
            # Fencing is expected (a rival instance, a timed-out transaction's epoch bump); any
            # other fatal error leaves the application nothing to do but die: a broker or client
            # bug until shown otherwise (seed 3501: INVALID_PRODUCER_ID_MAPPING from a coordinator
            # answering on state it had just unloaded).
            self.sim.unexpected.append(f"{self.name} {where} at {self.loop.time():.4f}: {exc!r}")

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
    def __init__(self, sim: Workload, name: str, topic: str = TOPIC) -> None:
        super().__init__(sim, name)
        self.topic = topic

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
                op = {"f": "send", "proc": self.name, "inc": inc, "seq": seq, "topic": self.topic,
                      "partition": part, "value": value, "t0": self.loop.time()}
                fut = await p.send(self.topic, value.encode(), partition=part)
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
            if sim.partitions > 1:
                writes.append(await self.raw_write(old, tid, pid, epoch, (part + 1) % sim.partitions, inc))
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


    async def raw_write(self, old: Producer, tid: str, pid: int, epoch: int, part: int, inc: int) -> dict[str, Any]:
        """The old epoch's first batch to a partition outside its transaction, sent as a bare Produce
        with no AddPartitionsToTxn before it -- what a client that writes before its coordinator
        answered sends (KIP-890's case). A library client asks the coordinator first and learns it
        is fenced there, so only this write tests the partition leader's own refusal: the
        coordinator's verification and the leader's producer state (the `fence` break switch)."""
        w: dict[str, Any] = {"partition": part, "value": f"{self.name}-{inc}-raw", "t0": self.loop.time(),
                             "error": None, "offset": None}
        batch = build_batch([Record(0, 0, None, w["value"].encode(), [])], base_timestamp=self.clock().now_ms(),
                            producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True)
        req = ProduceRequest(transactional_id=tid, acks=-1, timeout_ms=10_000, topic_data=[TopicProduceData(
            name=TOPIC, partition_data=[PartitionProduceData(index=part, records=batch)])])
        cluster = old._cluster
        try:
            tp = TopicPartition(TOPIC, part)
            leader = cluster.leader_for(tp)
            if leader is None:
                await cluster.refresh_metadata()
                leader = cluster.leader_for(tp)
            if leader is None:
                w["error"] = "LEADER_NOT_AVAILABLE"
                return w
            conn = await cluster.connection(leader, timeout=10)
            resp = await asyncio.wait_for(conn.request(req, timeout=15), 20)
            p = resp.responses[0].partition_responses[0]
            w.update(error=ErrorCode(p.error_code).name, offset=p.base_offset if p.error_code == 0 else None)
        except (KafkaClientError, OSError, TimeoutError) as e:
            w["error"] = _error_name(e)
        return w


class Poller(Worker):
    def __init__(self, sim: Workload, name: str, isolation: str, topic: str = TOPIC) -> None:
        super().__init__(sim, name)
        self.isolation = isolation
        self.topic = topic

    async def incarnation(self, inc: int) -> None:
        sim = self.sim
        c = Consumer(sim.bootstrap, client_id=self.name, isolation_level=self.isolation,
                     enable_auto_commit=False, auto_offset_reset="earliest",
                     request_timeout_ms=10_000, clock=self.clock())
        await c.start()
        try:
            tps = [TopicPartition(self.topic, p) for p in range(sim.partitions)]
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
                               "topic": self.topic, "recs": recs, "t0": t0, "t1": t1})
        except RetriableError as e:
            self.note("poll", e)
        finally:
            await c.close()


class Feeder(Worker):
    """The copier's input: ``in-<n>`` to partition n mod P, idempotent and acks=all. What the
    input holds in the end is read back, so the copier is judged against the input as it is."""

    def __init__(self, sim: Workload, name: str) -> None:
        super().__init__(sim, name)
        self.next = 0

    async def incarnation(self, inc: int) -> None:
        sim = self.sim
        p = Producer(sim.bootstrap, client_id=self.name, enable_idempotence=True, acks="all", linger_ms=2,
                     request_timeout_ms=10_000, delivery_timeout_ms=30_000, clock=self.clock())
        await p.start()
        try:
            while not self.halt:
                await p.send(COPY_IN, b"in-%d" % self.next, partition=self.next % sim.partitions)
                self.next += 1
                await asyncio.sleep(self.rng.uniform(0.01, 0.1) / sim.intensity)
        finally:
            try:
                await asyncio.wait_for(p.flush(), 30)
            except (KafkaClientError, TimeoutError) as e:
                self.note("flush", e)
            await p.close(timeout=5)


class Copier(Worker):
    """Consume-transform-produce, exactly once: a consumer in group COPIER_GROUP reads the input,
    a transactional producer writes ``t<txn>|<value>`` to the same partition of the output and
    commits the consumer's offsets in the same transaction. After a failed transaction it aborts
    and rewinds to the group's committed offsets; after an error it cannot go on from, a new
    incarnation (a restarted application) starts from them."""

    def __init__(self, sim: Workload, name: str) -> None:
        super().__init__(sim, name)
        self.txn = 0
        self.committed: set[int] = set()
        self.aborted: set[int] = set()
        self.unknown: set[int] = set()
        self.ends: dict[int, int] | None = None  # input end offsets once the feeder stopped: drain to them
        self.done_upto: dict[int, int] = {}  # what the last committed transaction committed, per partition

    def finished(self) -> bool:
        return self.ends is not None and all(self.done_upto.get(p, 0) >= e for p, e in self.ends.items())

    async def run(self) -> None:
        inc = 0
        while not self.finished() and not self.halt:
            inc += 1
            try:
                await self.incarnation(inc)
            except (KafkaClientError, OSError, TimeoutError) as e:
                self.note("incarnation", e)
                await asyncio.sleep(0.5)

    async def incarnation(self, inc: int) -> None:
        sim = self.sim
        c = Consumer(sim.bootstrap, group_id=COPIER_GROUP, client_id=f"{self.name}-{inc}",
                     isolation_level="read_committed", enable_auto_commit=False, auto_offset_reset="earliest",
                     session_timeout_ms=10_000, heartbeat_interval_ms=1_000, request_timeout_ms=10_000,
                     clock=self.clock())
        p = Producer(sim.bootstrap, client_id=f"{self.name}-{inc}", transactional_id=COPIER_ID,
                     transaction_timeout_ms=sim.txn_timeout_ms, linger_ms=2, request_timeout_ms=10_000,
                     delivery_timeout_ms=30_000, clock=self.clock())
        await c.start()
        await p.start()
        try:
            await asyncio.wait_for(p.init_transactions(), 60)
            c.subscribe([COPY_IN])
            while not self.finished() and not self.halt:
                got = await c.getmany(timeout_ms=500)
                if not got:
                    continue
                if not await self._copy(c, p, got):
                    return
        finally:
            await p.close(timeout=5)
            await c.close()

    async def _copy(self, c: Consumer, p: Producer, got: dict[TopicPartition, list[Any]]) -> bool:
        self.txn += 1
        no = self.txn
        try:
            await p.begin_transaction()
            offsets = {}
            for tp in sorted(got):
                for r in got[tp]:
                    await p.send(COPY_OUT, b"t%d|" % no + r.value, partition=tp.partition)
                offsets[tp] = got[tp][-1].offset + 1
            await asyncio.wait_for(p.send_offsets_to_transaction(offsets, c.group_metadata()), 30)
            await asyncio.wait_for(p.commit_transaction(), 30)
        except (KafkaClientError, OSError, TimeoutError) as e:
            self.note("txn", e)
            if isinstance(e, FatalError | TimeoutError):
                self.unknown.add(no)
                return False
            try:
                await asyncio.wait_for(p.abort_transaction(), 30)
            except (KafkaClientError, OSError, TimeoutError) as e2:
                self.note("abort", e2)
                self.unknown.add(no)
                return False
            self.aborted.add(no)
            for tp in c.assignment():  # rewind: the group's offsets are where the copy stands
                committed = await c.committed(tp)
                c.seek(tp, committed if committed is not None else 0)
            return True
        self.committed.add(no)
        for tp, o in offsets.items():
            self.done_upto[tp.partition] = max(self.done_upto.get(tp.partition, 0), o)
        return True


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
            PlainProducer(self, "p1"), PlainProducer(self, "p2", PAIR),
            TxnProducer(self, "t1", "sim-t1"), TxnProducer(self, "t2", "sim-t2"),
            Poller(self, "rc1", "read_committed"), Poller(self, "ru1", "read_uncommitted"),
            Zombie(self, "z1"),
            Feeder(self, "feeder"), Poller(self, "verifier", "read_committed", COPY_OUT),
        ]
        self.copier = Copier(self, "copier")
        self.unexpected: list[str] = []  # fatal errors no application should meet (Worker.note)
        self.procs: list[Process] = []
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self.write({"f": "meta", "topic": TOPIC, "partitions": self.partitions, "txn_timeout_ms": self.txn_timeout_ms,
                    "copier": {"input": COPY_IN, "output": COPY_OUT}})
        for i, w in enumerate([*self.workers, self.copier]):
            proc = Process(f"client-{w.name}", f"10.0.1.{i + 1}")
            self.procs.append(proc)
            self.tasks.append(self.loop.spawn(proc, w.run(), name=w.name))

    def transactional(self) -> dict[str, Process]:
        """Each transactional id an application holds for the whole run -> that application's
        process (the zombie's ids change with each incarnation)."""
        procs = dict(zip([*self.workers, self.copier], self.procs, strict=False))
        ids = {w.tid: procs[w] for w in self.workers if isinstance(w, TxnProducer) and w in procs}
        if self.copier in procs:
            ids[COPIER_ID] = procs[self.copier]
        return ids

    async def stop(self) -> None:
        """The applications stop; the copier first copies what its input holds by then."""
        for w in self.workers:
            if not isinstance(w, Poller):
                w.halt = True
        await asyncio.wait([t for w, t in zip(self.workers, self.tasks, strict=False) if not isinstance(w, Poller)],
                           timeout=90)
        proc = Process("client-drain", "10.0.1.101")
        source = await self.loop.spawn(proc, self._final_read("read_committed", COPY_IN))
        self.write(source)
        self.copier.ends = {int(p): e for p, e in source["ends"].items()}
        deadline = self.loop.time() + DRAIN_S
        while not self.copier.finished() and self.loop.time() < deadline:
            await asyncio.sleep(0.5)
        self.source = source
        for w in self.workers:
            w.halt = True
        self.copier.halt = True
        await asyncio.wait(self.tasks, timeout=90)

    async def settle(self) -> None:
        """After healing: a fresh read of each topic, HW/LSO once transactions had time to end,
        the copier's outcome against its group's committed offsets."""
        proc = Process("client-final", "10.0.1.100")
        await self.loop.spawn(proc, self._settle())

    async def _settle(self) -> None:
        for topic in (TOPIC, PAIR, COPY_OUT):
            offsets = await self._offsets(topic)
            for p in range(self.partitions):
                hw, lso = offsets.get(p, (-1, -1))
                self.write({"f": "offsets", "topic": topic, "partition": p, "hw": hw, "lso": lso})
        for topic in (TOPIC, PAIR):
            for iso in ("read_committed", "read_uncommitted"):
                self.write(await self._final_read(iso, topic))
        self.write(await self._final_read("read_committed", COPY_OUT))
        c = self.copier
        self.write({"f": "copier", "pipeline": c.name, "input_topic": COPY_IN, "output_topic": COPY_OUT,
                    "input": self.source["recs"], "group_offsets": await self._group_offsets(),
                    "committed": sorted(c.committed), "aborted": sorted(c.aborted), "unknown": sorted(c.unknown)})

    async def _group_offsets(self) -> dict[str, int]:
        c = Consumer(self.bootstrap, group_id=COPIER_GROUP, enable_auto_commit=False, request_timeout_ms=10_000,
                     clock=self.clock)
        await c.start()
        out: dict[str, int] = {}
        try:
            for p in range(self.partitions):
                for _ in range(20):
                    try:
                        o = await c.committed(TopicPartition(COPY_IN, p))
                        out[str(p)] = o if o is not None else -1
                        break
                    except (KafkaClientError, OSError, TimeoutError):
                        await asyncio.sleep(0.5)
                out.setdefault(str(p), -1)
        finally:
            await c.close()
        return out

    async def _offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        deadline = self.loop.time() + 2 * self.txn_timeout_ms / 1000 + 30
        tps = [TopicPartition(topic, p) for p in range(self.partitions)]
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

    async def _final_read(self, isolation: str, topic: str = TOPIC) -> dict[str, Any]:
        deadline = self.loop.time() + 60
        tps = [TopicPartition(topic, p) for p in range(self.partitions)]
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
        return {"f": "final-read", "iso": isolation, "topic": topic, "recs": recs,
                "ends": {str(p): e for p, e in ends.items()}, "complete": complete}
