"""The chaos suite's clients: one process in the client namespace that records every operation.

Run by the campaign as ``python -m helpers.chaos.workload`` (tests/ on PYTHONPATH) inside the client
namespace, so every fault the nemesis puts between hosts is between these clients and the brokers too.
It writes a JSON-lines history (format: helpers.chaos.checker) and keeps going until the campaign
creates the *stop* file; then it drains (producers finish, copiers finish their input, transactions end)
and writes the final reads the checker judges against. Exit status 0 once the history is complete.

Two workloads run at once:

* **mixed** (Jepsen's Kafka test): idempotent producers send unique values to random partitions,
  transactional producers write 1-4 values over several partitions and commit or abort, and a
  read_committed and a read_uncommitted consumer poll every partition and record what they saw.
* **copier** (Kafka's transactional system test): two consume-transform-produce pipelines with
  disjoint input partitions, consumer offsets in the transaction, random aborts and "crashes" whose
  successor fences them; a read_committed verifier polls the output while the faults run.
* **zombie** (helpers.chaos.zombie): a transactional id whose every instance is fenced by the next
  one and then goes on writing and committing under its old epoch, straight to the partition
  leaders, recording what the brokers answered.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import random
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from ..confluent import QUIET
from ..soak import TxnPipeline, commit, find_hanging, prefill
from .zombie import PARTITIONS as ZOMBIE_PARTITIONS
from .zombie import Zombie

OP_TIMEOUT = 30.0
TXN_NO_STRIDE = 1_000_000  # copier i numbers its transactions from i * stride: unique across copiers


class History:
    """Append-only JSON lines, one per operation, written whole under a lock (threads share it)."""

    def __init__(self, path: Path) -> None:
        self._f = path.open("a", buffering=1)
        self._lock = threading.Lock()

    def write(self, op: dict[str, Any]) -> None:
        line = json.dumps(op, separators=(",", ":"))
        with self._lock:
            self._f.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            self._f.close()


# The plain (non-transactional) idempotent producers' settings. One request in flight per
# connection: with more, librdkafka (up to 2.16 at least; confluentinc/librdkafka#4953) answers an
# OUT_OF_ORDER_SEQUENCE_NUMBER on a request queued behind a failed one by bumping the producer's
# epoch for every partition, and re-sends under the new epoch a batch of another partition that a
# leader may already have stored: a duplicate an Apache Kafka broker cannot prevent either (seed
# 2612, docs/chaos.md). One in flight makes such bumps rare (seed 2613: two in an hour, across
# leader moves), not impossible. The transactional producers keep five in flight: there the bump aborts the
# transaction, so the broker's deduplication of pipelined retries stays under test.
IDEMPOTENT_SETTINGS: dict[str, Any] = {"acks": "all", "enable.idempotence": True, "linger.ms": 5,
                                       "message.timeout.ms": 60_000, "max.in.flight.requests.per.connection": 1}


class Worker(threading.Thread):
    """A client thread that stops when told and reports its own bugs instead of dying silently."""

    def __init__(self, name: str, history: History, bootstrap: str, seed: int) -> None:
        super().__init__(name=name, daemon=True)
        self.proc = name
        self.history = history
        self.bootstrap = bootstrap
        self.rng = random.Random(f"{seed}-{name}")
        self.halt = threading.Event()
        self.crashed: str | None = None
        self.errors: dict[str, int] = {}
        self.producer_extra: dict[str, Any] = {}  # settings every idempotent producer of this worker adds

    def run(self) -> None:
        try:
            self.body()
        except BaseException:  # a bug in the workload: the campaign fails on it
            self.crashed = traceback.format_exc()

    def body(self) -> None:
        """Incarnation after incarnation: a client broken beyond repair is replaced by a new one."""
        inc = 0
        while not self.halt.is_set():
            inc += 1
            self._incarnation(inc)

    def _incarnation(self, inc: int) -> None:
        raise NotImplementedError

    def note(self, where: str, err: object) -> None:
        name = err.name() if isinstance(err, KafkaError) else type(err).__name__
        key = f"{where}:{name}"
        self.errors[key] = self.errors.get(key, 0) + 1

    def _idempotent_producer(self, inc: int) -> Producer:
        """Incarnation `inc`'s idempotent acks=all producer, its epoch bumps recorded."""
        return Producer({**IDEMPOTENT_SETTINGS, "bootstrap.servers": self.bootstrap, **self.producer_extra,
                         **self._bumps_recorded(inc)})

    def _bumps_recorded(self, inc: int) -> dict[str, Any]:
        """Client settings that put each producer epoch bump, with librdkafka's reason for it, in
        the history: the checker cites them for values stored under two epochs. Only the EOS debug
        context is logged, and of it only the bumps are kept."""
        history, proc = self.history, self.proc

        class Bumps(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                text = record.getMessage()
                if "epoch bump" in text:
                    history.write({"f": "bump", "proc": proc, "inc": inc, "t": time.monotonic(), "what": text[:400]})

        logger = logging.getLogger(f"chaos.bumps.{proc}.{inc}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        logger.addHandler(Bumps())
        return {"debug": "eos", "log_level": 7, "logger": logger}


def _kafka_error(exc: BaseException) -> KafkaError | None:
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return err if isinstance(err, KafkaError) else None


def _finish(p: Producer) -> None:
    """Deliver or give up on what is in flight; every message left gets its delivery report (an
    error, recorded as an unknown outcome), even from a producer a fatal error has broken."""
    for step in (lambda: p.flush(OP_TIMEOUT), p.purge, lambda: p.flush(5)):
        try:
            step()
        except KafkaException:
            continue


def _pace(p: Producer, due: float, rate: float) -> float:
    """Serve delivery reports until the next send is due, `rate` sends a second on a monotonic
    schedule (poll() returns early whenever a report arrives, so one poll per send is no pacing).
    Returns the next due time; a producer that fell behind catches up by at most a second's sends."""
    due = max(due + 1.0 / rate, time.monotonic() - 1.0)
    while (wait := due - time.monotonic()) > 0:
        p.poll(wait)
    return due


class PlainProducer(Worker):
    """Idempotent, acks=all, paced sends of unique values; a fatal error starts a new incarnation."""

    def __init__(self, name: str, history: History, bootstrap: str, seed: int, topic: str,
                 partitions: int, rate: float) -> None:
        super().__init__(name, history, bootstrap, seed)
        self.topic, self.partitions, self.rate = topic, partitions, rate

    def _incarnation(self, inc: int) -> None:
        p = self._idempotent_producer(inc)
        fatal = threading.Event()
        seq = 0
        due = time.monotonic()
        try:
            while not self.halt.is_set() and not fatal.is_set():
                seq += 1
                part = self.rng.randrange(self.partitions)
                value = f"{self.proc}-{inc}-{seq}"
                op = {"f": "send", "proc": self.proc, "inc": inc, "seq": seq, "topic": self.topic,
                      "partition": part, "value": value, "t0": time.monotonic()}
                try:
                    p.produce(self.topic, value=value.encode(), partition=part, on_delivery=self._done(op, fatal))
                except BufferError:
                    p.poll(0.1)
                    continue
                due = _pace(p, due, self.rate)
        except KafkaException as exc:  # a fatal producer error surfaces from poll() too
            self.note("poll", _kafka_error(exc) or exc)
        _finish(p)

    def _done(self, op: dict[str, Any], fatal: threading.Event) -> Any:
        def cb(err: KafkaError | None, msg: Any) -> None:
            op["t1"] = time.monotonic()
            if err is None:
                op.update(status="ok", offset=msg.offset())
            else:
                op.update(status="info", offset=None, error=err.name())
                self.note("deliver", err)
                if err.fatal():
                    fatal.set()
            self.history.write(op)

        return cb


class Feeder(Worker):
    """Feeds the copier's input while the faults run: ``in-<i>`` to partition i mod P, idempotent and
    acks=all. What the input holds in the end is read back (a send with an unknown outcome may or may
    not be there), so the copier is judged against the input as it is."""

    def __init__(self, history: History, bootstrap: str, seed: int, topic: str, partitions: int,
                 first: int, rate: float) -> None:
        super().__init__("feeder", history, bootstrap, seed)
        self.topic, self.partitions, self.next, self.rate = topic, partitions, first, rate

    def body(self) -> None:
        inc = 1
        p = self._idempotent_producer(inc)
        due = time.monotonic()
        while not self.halt.is_set():
            try:
                p.produce(self.topic, value=b"in-%d" % self.next, partition=self.next % self.partitions)
                self.next += 1
                due = _pace(p, due, self.rate)
            except BufferError:
                p.poll(0.1)
            except KafkaException as exc:  # fatal: a new producer carries on with the next values
                self.note("feed", _kafka_error(exc) or exc)
                _finish(p)
                inc += 1
                p = self._idempotent_producer(inc)
        _finish(p)


class TxnProducer(Worker):
    """Transactions of 1-4 values over random partitions; a fifth of them aborted on purpose."""

    def __init__(self, name: str, history: History, bootstrap: str, seed: int, topic: str,
                 partitions: int, txn_timeout_ms: int, tid: str) -> None:
        super().__init__(name, history, bootstrap, seed)
        self.topic, self.partitions = topic, partitions
        self.txn_timeout_ms, self.tid = txn_timeout_ms, tid
        self.commits = self.aborts = self.unknown = 0

    def body(self) -> None:
        inc = 0
        while not self.halt.is_set():
            inc += 1
            p = self._producer()
            if p is None:
                continue
            seq = 0
            while not self.halt.is_set():
                seq += 1
                if not self._transaction(p, inc, seq):
                    break  # outcome unknown or fatal: a new incarnation fences this one
            _finish(p)

    def _producer(self) -> Producer | None:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.tid,
                      "transaction.timeout.ms": self.txn_timeout_ms, "linger.ms": 5, **QUIET})
        try:
            p.init_transactions(OP_TIMEOUT)
            return p
        except KafkaException as exc:
            self.note("init", _kafka_error(exc) or exc)
            return None

    def _transaction(self, p: Producer, inc: int, seq: int) -> bool:
        sends: list[dict[str, Any]] = []
        op: dict[str, Any] = {"f": "txn", "proc": self.proc, "inc": inc, "seq": seq, "topic": self.topic,
                              "sends": sends, "tc": None, "t0": time.monotonic()}
        abort = self.rng.random() < 0.2
        keep = True
        try:
            p.begin_transaction()
            for i in range(self.rng.randint(1, 4)):
                send = {"partition": self.rng.randrange(self.partitions),
                        "value": f"{self.proc}-{inc}-{seq}-{i}", "offset": None}
                sends.append(send)
                p.produce(self.topic, value=send["value"].encode(), partition=send["partition"],
                          on_delivery=self._delivered(send))
            if p.flush(OP_TIMEOUT):
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "flush timed out", txn_requires_abort=True))
            op["tc"] = time.monotonic()
            if abort:
                p.abort_transaction(OP_TIMEOUT)
                op["outcome"] = "abort"
                self.aborts += 1
            else:
                commit(p, OP_TIMEOUT)
                op["outcome"] = "commit"
                self.commits += 1
        except KafkaException as exc:
            err = _kafka_error(exc)
            self.note("txn", err or exc)
            op["outcome"], keep = "info", False
            if err is not None and err.txn_requires_abort() and not err.fatal():
                try:
                    p.abort_transaction(OP_TIMEOUT)
                    op["outcome"], keep = "abort", True
                except KafkaException as exc2:
                    self.note("abort", _kafka_error(exc2) or exc2)
            if op["outcome"] == "info":
                self.unknown += 1
        op["t1"] = time.monotonic()
        self.history.write(op)
        return keep

    @staticmethod
    def _delivered(send: dict[str, Any]) -> Any:
        def cb(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                send["offset"] = msg.offset()
            else:
                send["error"] = err.name()

        return cb


class Poller(Worker):
    """Reads every partition from the beginning and records each poll; any consumer error that is not
    transient ends the incarnation and a fresh consumer starts again from the beginning."""

    def __init__(self, name: str, history: History, bootstrap: str, seed: int, topic: str,
                 partitions: int, isolation: str) -> None:
        super().__init__(name, history, bootstrap, seed)
        self.topic, self.partitions, self.isolation = topic, partitions, isolation
        self.records = 0

    def _incarnation(self, inc: int) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"chaos-{self.proc}",
                      "isolation.level": self.isolation, "enable.auto.commit": False,
                      "auto.offset.reset": "error", "enable.partition.eof": False,
                      "fetch.wait.max.ms": 100, **QUIET})
        try:
            c.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
            while not self.halt.is_set():
                t0 = time.monotonic()
                msgs = c.consume(500, 0.5)
                t1 = time.monotonic()
                recs, broken = [], False
                for m in msgs:
                    err = m.error()
                    if err is None:
                        recs.append([m.partition(), m.offset(), m.value().decode()])
                    else:
                        self.note("consume", err)
                        broken = broken or err.fatal() or err.code() in (
                            KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE)
                if recs:
                    self.records += len(recs)
                    self.history.write({"f": "poll", "proc": self.proc, "inc": inc, "iso": self.isolation,
                                        "topic": self.topic, "recs": recs, "t0": t0, "t1": t1})
                if broken:
                    return
        except KafkaException as exc:
            self.note("consumer", _kafka_error(exc) or exc)
        finally:
            c.close()


class ZombieWorker(Worker):
    """The zombie's thread (helpers.chaos.zombie): stops after a committed transaction when told."""

    def __init__(self, history: History, bootstrap: str, seed: int, topic: str, txn_timeout_ms: int) -> None:
        super().__init__("zombie", history, bootstrap, seed)
        self.zombie = Zombie(bootstrap, topic, f"chaos-{seed}-zombie", txn_timeout_ms, history.write, self._note,
                             self.halt.is_set, self.halt.wait)

    def _note(self, where: str, what: str) -> None:
        key = f"{where}:{what}"
        self.errors[key] = self.errors.get(key, 0) + 1

    def body(self) -> None:
        self.zombie.run()


class Copier:
    """One copier application: a TxnPipeline, watched for stalls.

    A copier that makes no progress for ``STALL_S`` (longer than any fault's hold plus the client's
    own 30 s timeouts) has a client call stuck past its timeout: a ``stall`` op goes to the history,
    with every thread's stack to the log, and the checker reports it as an anomaly. The copier is
    not replaced: a stall is a finding, whatever its cause (librdkafka's lookups without a deadline,
    soak.py, or a broker answer that starts one)."""

    STALL_S = 120.0

    def __init__(self, name: str, number: int, parts: list[int], args: argparse.Namespace, say: Any,
                 history: Any) -> None:
        self.name, self.number, self.parts, self.args, self.say = name, number, parts, args, say
        self.history = history
        self.stalls = 0
        self._progress: tuple[int, ...] = ()
        self._since = time.monotonic()
        self._reported = False  # this stall is in the history already
        a = args
        c = TxnPipeline(a.bootstrap, a.copier_input, a.copier_output,
                        {p: 1 << 62 for p in parts},  # the real ends are set at drain
                        seed=a.seed + number, deadline=time.monotonic() + 10 * 3600, max_txns=10**9,
                        producer_conf={"transaction.timeout.ms": a.txn_timeout_ms})
        c.txn_no = number * TXN_NO_STRIDE
        self.instances = [c]
        c.start()

    @property
    def current(self) -> TxnPipeline:
        return self.instances[-1]

    def watch(self) -> None:
        c = self.current
        progress = c.progress
        now = time.monotonic()
        if progress != self._progress:
            self._progress, self._since, self._reported = progress, now, False
        elif (c.is_alive() and not self.finished() and not self._reported
              and now - self._since > self.STALL_S):
            self._reported = True
            self.stalls += 1
            self.history.write({"f": "stall", "pipeline": self.name, "since": self._since, "t": now,
                                "summary": c.summary()})
            self.say(f"copier {self.name} made no progress for {now - self._since:.0f}s: {c.summary()}; "
                     "a stall (reported, not restarted); every thread's stack:")
            faulthandler.dump_traceback(all_threads=True)

    def set_ends(self, ends: dict[int, int]) -> None:
        for c in self.instances:
            c.ends = {p: ends[p] for p in self.parts}

    def finished(self) -> bool:
        c = self.current
        return all(c.committed_offsets.get(p, 0) >= end for p, end in c.ends.items())

    def stop(self) -> None:
        for c in self.instances:
            c.stop()
        self.current.join(OP_TIMEOUT * 3)

    def crashed(self) -> str | None:
        return next((c.crashed for c in self.instances if c.crashed), None)

    def outcomes(self) -> dict[str, list[int]]:
        return {k: sorted({n for c in self.instances for n in getattr(c, attr)})
                for k, attr in (("committed", "committed_txns"), ("aborted", "aborted_txns"),
                                ("unknown", "unknown_txns"))}

    def summary(self) -> str:
        return f"{self.stalls} stalls; " + " | ".join(c.summary() for c in self.instances)


# ------------------------------------------------------------------------------------ final reads


def _consumer(bootstrap: str, isolation: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-final", "isolation.level": isolation,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "enable.partition.eof": False, "fetch.wait.max.ms": 100, **QUIET})


def _marks(c: Consumer, topic: str, partitions: int, deadline: float) -> dict[int, int] | None:
    """The end offset each partition has for this consumer's isolation level (HW for
    read_uncommitted, LSO for read_committed: ListOffsets carries the isolation level)."""
    out: dict[int, int] = {}
    for p in range(partitions):
        while p not in out:
            try:
                out[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=5, cached=False)[1]
            except KafkaException:
                if time.monotonic() > deadline:
                    return None
    return out


def group_offsets(bootstrap: str, group: str, topic: str, parts: list[int], timeout: float) -> dict[int, int]:
    """The offsets `group` has committed on `parts` (-1 where none or not obtained): how far a
    copier got, as the broker says, which is what its output must match exactly once."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                  "enable.auto.commit": False, **QUIET})
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                tps = c.committed([TopicPartition(topic, p) for p in parts], timeout=10)
                return {tp.partition: (tp.offset if tp.offset >= 0 and tp.error is None else -1) for tp in tps}
            except KafkaException:
                if time.monotonic() > deadline:
                    return {p: -1 for p in parts}
    finally:
        c.close()


def final_read(bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float) -> dict[str, Any]:
    """Everything in `topic` up to the high watermark, read by a fresh consumer from offset 0."""
    deadline = time.monotonic() + timeout
    hw_reader = _consumer(bootstrap, "read_uncommitted")
    try:
        ends = _marks(hw_reader, topic, partitions, deadline) or {}
    finally:
        hw_reader.close()
    c = _consumer(bootstrap, isolation)
    recs: list[list[Any]] = []
    complete = False
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        while time.monotonic() < deadline:
            if len(ends) == partitions:
                pos = {tp.partition: tp.offset for tp in c.position(
                    [TopicPartition(topic, p) for p in range(partitions)])}
                if all(ends[p] == 0 or pos.get(p, -1) >= ends[p] for p in range(partitions)):
                    complete = True
                    break
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    recs.append([m.partition(), m.offset(), m.value().decode()])
    finally:
        c.close()
    return {"f": "final-read", "iso": isolation, "topic": topic, "recs": recs,
            "ends": {str(p): e for p, e in ends.items()}, "complete": complete}


def settled_offsets(bootstrap: str, topic: str, partitions: int, txn_timeout_ms: int) -> list[dict[str, Any]]:
    """HW and LSO of every partition, once LSO has caught up with HW or well past the transaction
    timeout (a coordinator must have aborted anything still open by then): LSO < HW is a hanging
    transaction."""
    t0 = time.monotonic()
    deadline = t0 + 2 * txn_timeout_ms / 1000 + 20
    ru, rc = _consumer(bootstrap, "read_uncommitted"), _consumer(bootstrap, "read_committed")
    try:
        while True:
            hw = _marks(ru, topic, partitions, deadline) or {}
            lso = _marks(rc, topic, partitions, deadline) or {}
            settled = len(hw) == len(lso) == partitions and all(lso[p] >= hw[p] for p in range(partitions))
            if settled or time.monotonic() > deadline:
                break
            time.sleep(0.5)  # re-poll interval of the condition above, bounded by `deadline`
    finally:
        ru.close()
        rc.close()
    waited = int((time.monotonic() - t0) * 1000)
    return [{"f": "offsets", "topic": topic, "partition": p, "hw": hw.get(p, -1), "lso": lso.get(p, -1),
             "waited_ms": waited} for p in range(partitions)]


# ------------------------------------------------------------------------------------------ main


def say(msg: str) -> None:
    print(f"[workload {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(args: argparse.Namespace) -> int:
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1`: where is every thread?
    history = History(Path(args.history))
    bs, P = args.bootstrap, args.partitions
    prefill(bs, args.copier_input, args.copier_values, P)
    feeder = Feeder(history, bs, args.seed, args.copier_input, P, args.copier_values, args.copier_rate)
    history.write({"f": "meta", "topic": args.topic, "partitions": P, "seed": args.seed,
                   "txn_timeout_ms": args.txn_timeout_ms,
                   "copier": {"input": args.copier_input, "output": args.copier_output}})
    mixed: list[Worker] = [
        PlainProducer("p1", history, bs, args.seed, args.topic, P, args.rate),
        PlainProducer("p2", history, bs, args.seed, args.topic, P, args.rate),
        TxnProducer("t1", history, bs, args.seed, args.topic, P, args.txn_timeout_ms, f"chaos-{args.seed}-t1"),
        TxnProducer("t2", history, bs, args.seed, args.topic, P, args.txn_timeout_ms, f"chaos-{args.seed}-t2"),
        zombie := ZombieWorker(history, bs, args.seed, args.zombie_topic, args.txn_timeout_ms),
    ]
    pollers: list[Worker] = [
        Poller("c-rc", history, bs, args.seed, args.topic, P, "read_committed"),
        Poller("c-ru", history, bs, args.seed, args.topic, P, "read_uncommitted"),
        Poller("verifier", history, bs, args.seed, args.copier_output, P, "read_committed"),
    ]
    if args.request_timeout_ms:  # shorter: a request whose answer is lost is re-sent sooner (dedup self-test)
        for w in [*mixed, feeder]:
            w.producer_extra["request.timeout.ms"] = args.request_timeout_ms
    for w in [*mixed, feeder, *pollers]:
        w.start()
    half = P // 2
    copiers = [Copier(f"c{i}", i, list(parts), args, say, history)
               for i, parts in enumerate((range(half), range(half, P)), start=1)]
    history.write({"f": "note", "what": "started", "t": time.monotonic()})

    stop = Path(args.stop)
    while not stop.exists():
        time.sleep(0.2)  # the campaign's stop file is polled; nothing else waits on this
        for c in copiers:
            c.watch()
        bugs = [w.crashed for w in [*mixed, feeder, *pollers] if w.crashed] + [c.crashed() for c in copiers]
        if any(bugs):
            sys.stderr.write("workload bug:\n" + "\n".join(b for b in bugs if b))
            return 3
    drain_deadline = time.monotonic() + args.drain_seconds

    for w in [*mixed, feeder]:
        w.halt.set()
    for w in [*mixed, feeder]:
        w.join(max(1.0, drain_deadline - time.monotonic()))
    say("producers stopped")
    source = final_read(bs, args.copier_input, P, "read_uncommitted", 120)
    history.write(source)
    input_ends = {int(p): e for p, e in source["ends"].items()}
    for c in copiers:
        c.set_ends(input_ends)
    while time.monotonic() < drain_deadline and not all(c.finished() for c in copiers):
        time.sleep(0.5)  # progress is polled; the watch reports a stalled copier
        for c in copiers:
            c.watch()
    for c in copiers:
        if not c.finished():
            say(f"copier {c.name} did not finish its input in time: {c.summary()}; every thread's stack:")
            faulthandler.dump_traceback(all_threads=True)
        c.stop()
    say("copiers done")
    for w in pollers:
        w.halt.set()
    for w in pollers:
        w.join(10)

    for op in settled_offsets(bs, args.topic, P, args.txn_timeout_ms):
        history.write(op)
    for op in settled_offsets(bs, args.copier_output, P, args.txn_timeout_ms):
        history.write(op)
    t_zombie = time.monotonic()
    for op in settled_offsets(bs, args.zombie_topic, ZOMBIE_PARTITIONS, args.txn_timeout_ms):
        history.write(op)
    zombie_s = time.monotonic() - t_zombie
    say("offsets settled")
    for iso in ("read_committed", "read_uncommitted"):
        history.write(final_read(bs, args.topic, P, iso, 120))
    history.write(final_read(bs, args.copier_output, P, "read_committed", 120))
    t_zombie = time.monotonic()
    for iso in ("read_committed", "read_uncommitted"):
        history.write(final_read(bs, args.zombie_topic, ZOMBIE_PARTITIONS, iso, 120))
    zombie_s += time.monotonic() - t_zombie
    say(f"final reads done (the zombie topic's offsets and reads: {zombie_s:.1f}s)")
    for c in copiers:
        reached = group_offsets(bs, c.current.group, args.copier_input, c.parts, 60)
        history.write({"f": "copier", "pipeline": c.name, "input_topic": args.copier_input,
                       "output_topic": args.copier_output,
                       "input": [r for r in source["recs"] if r[0] in c.parts],
                       "group_offsets": {str(p): o for p, o in reached.items()}, **c.outcomes()})
    try:
        hanging = find_hanging(bs.split(",")[0])
    except AssertionError as exc:
        hanging = [{"error": f"find-hanging failed: {exc}"}]
    history.write({"f": "hanging", "txns": hanging})
    workers = [*mixed, feeder, *pollers]
    history.write({"f": "note", "what": "end", "errors": {w.proc: w.errors for w in workers},
                   "txn": {w.proc: [w.commits, w.aborts, w.unknown] for w in mixed if isinstance(w, TxnProducer)},
                   "copiers": {c.name: c.summary() for c in copiers},
                    "copier_stalls": {c.name: c.stalls for c in copiers},
                    "zombie": {"instances": zombie.zombie.inc, "fences": zombie.zombie.fences}})
    history.close()
    bugs = [w.crashed for w in workers if w.crashed] + [c.crashed() for c in copiers]
    if any(bugs):
        sys.stderr.write("workload bug:\n" + "\n".join(b for b in bugs if b))
        return 3
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--history", required=True)
    ap.add_argument("--stop", required=True, help="the workload drains and exits once this file exists")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--topic", default="mixed")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rate", type=float, default=40.0, help="sends per second of each plain producer")
    ap.add_argument("--txn-timeout-ms", type=int, default=10_000)
    ap.add_argument("--zombie-topic", default="zombie", help=f"{ZOMBIE_PARTITIONS} partitions")
    ap.add_argument("--copier-input", default="cin")
    ap.add_argument("--copier-output", default="cout")
    ap.add_argument("--copier-values", type=int, default=200, help="input written before the faults start")
    ap.add_argument("--copier-rate", type=float, default=10.0, help="input values per second during the faults")
    ap.add_argument("--drain-seconds", type=float, default=240.0)
    ap.add_argument("--request-timeout-ms", type=int, default=0, help="the idempotent producers' request.timeout.ms "
                    "(0: librdkafka's default)")
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
