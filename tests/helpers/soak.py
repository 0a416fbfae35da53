"""Soak-test machinery: a transactional consume-transform-produce worker that behaves like a real
application under broker faults, an idempotent producer that streams until told to stop, and the
fault injector (SIGKILL + restart, SIGSTOP + SIGCONT) that the soak tests drive against a broker.

Everything here runs in background threads of the test process; the test's main thread injects
faults and waits on the counters these objects expose (``wait_until``), never on sleeps.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from .broker import REPO_ROOT, BrokerProcess
from .confluent import QUIET

OP_TIMEOUT = 30.0  # seconds librdkafka gets for one transactional call before it reports a timeout

# librdkafka >= 2.10 re-bootstraps as soon as every known broker is down at once -- with one broker,
# on every crash -- and decommissions the broker object, which can stay cached as the group
# coordinator: send_offsets_to_transaction() then blocks forever, ignoring its timeout (client bug
# https://github.com/confluentinc/librdkafka/issues/5511, fix pending in PR #5512; reproduced here by
# this soak before the setting below). With "none" the client keeps reconnecting to the same broker.
NO_REBOOTSTRAP = {"metadata.recovery.strategy": "none"}
# The same client bug has a second trigger that no setting avoids: a broker that died is left out of
# Metadata while it is fenced (Kafka's brokers list only unfenced brokers too), librdkafka
# decommissions it, and if it was cached as the group coordinator, send_offsets_to_transaction()
# waits for a state change of that broker's connection, which never comes (seen in
# test_txn_failover with debug on: the coordinator cache still held the decommissioned broker, whose
# thread logged "Handle is terminating" for minutes). Any other broker connection changing state
# re-drives the lookup; an idle connection closed after this long is such a change, so a stalled
# lookup resumes within it.
IDLE_CLOSE = {"connections.max.idle.ms": 10_000}
# librdkafka debug contexts for the transactional producers (e.g. "eos,broker,protocol"), to see
# which broker answers precede a stalled call; written by librdkafka to the test's stderr
CLIENT_DEBUG = os.environ.get("KETCH_TXN_CLIENT_DEBUG", "")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


# ---------------------------------------------------------------------------------------------- faults


@dataclass
class FaultLog:
    kills: int = 0
    stops: int = 0
    events: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return f"{self.kills} SIGKILL+restart, {self.stops} SIGSTOP/SIGCONT: " + ", ".join(self.events[-40:])


class FaultInjector:
    """SIGKILL + restart on the same port and data directory, or SIGSTOP for a bounded time + SIGCONT."""

    def __init__(self, broker: BrokerProcess, rng: random.Random, log: FaultLog | None = None) -> None:
        self.broker = broker
        self.rng = rng
        self.log = log or FaultLog()
        self._stopped_pid: int | None = None

    def kill_and_restart(self) -> None:
        t0 = time.monotonic()
        self.broker.kill()
        self.broker.start(timeout=60)
        self.log.kills += 1
        self.log.events.append(f"kill+restart({time.monotonic() - t0:.1f}s)")

    def stop_and_continue(self, low: float = 1.0, high: float = 5.0) -> None:
        pause = round(self.rng.uniform(low, high), 2)
        pid = self.broker.pid
        os.kill(pid, signal.SIGSTOP)
        self._stopped_pid = pid
        try:
            # The length of the freeze is the fault itself (a GC pause, a stalled VM), not a wait for
            # something to happen: nothing is synchronised on this sleep.
            time.sleep(pause)
        finally:
            self.resume()
        self.log.stops += 1
        self.log.events.append(f"stop({pause}s)")

    def resume(self) -> None:
        """SIGCONT a broker left frozen (safe to call any time, e.g. from a finally)."""
        if self._stopped_pid is not None:
            try:
                os.kill(self._stopped_pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self._stopped_pid = None

    def random_fault(self) -> None:
        if self.rng.random() < 0.5:
            self.kill_and_restart()
        else:
            self.stop_and_continue()

    def ensure_up(self) -> None:
        self.resume()
        if not self.broker.is_running():
            self.broker.kill()  # reap whatever is left
            self.broker.start(timeout=60)


# -------------------------------------------------------------------------------------- input data


def prefill(bootstrap: str, topic: str, n: int, partitions: int, conf: dict[str, Any] | None = None) -> dict[int, int]:
    """Produce values ``in-<i>`` (i < n) round-robin over the partitions; return the expected end
    offset of each partition. Fails on any delivery error."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, **QUIET, **(conf or {})})
    errors: list[KafkaError] = []
    delivered = [0]

    def cb(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered[0] += 1

    for i in range(n):
        while True:
            try:
                p.produce(topic, value=b"in-%d" % i, partition=i % partitions, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(120)
    assert not errors and left == 0, f"prefill: {left} undelivered, errors {errors[:3]}"
    assert delivered[0] == n
    return {part: len(range(part, n, partitions)) for part in range(partitions)}


# ------------------------------------------------------------------ transactional pipeline worker


def out_value(txn_no: int, value: bytes) -> bytes:
    return b"t%d|%s" % (txn_no, value)


def parse_out(value: bytes) -> tuple[int, bytes]:
    head, _, body = value.partition(b"|")
    return int(head[1:]), body


def commit(producer: Producer, timeout: float, on_retry: Any = None, attempts: int = 3) -> None:
    """commit_transaction, called again (bounded) after a retriable error, as the client's
    documentation asks; anything else, or the last attempt's error, is raised."""
    for attempt in range(attempts):
        try:
            producer.commit_transaction(timeout)
            return
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if attempt < attempts - 1 and isinstance(err, KafkaError) and err.retriable() and not (
                err.fatal() or err.txn_requires_abort()
            ):
                if on_retry is not None:
                    on_retry(exc)
                continue
            raise


class TxnPipeline(threading.Thread):
    """Reads ``src`` (manual assignment, read_committed), writes ``out-`` copies to ``dst`` in
    transactions that also carry the consumer offsets, and aborts a random third of them on purpose.

    Error handling is that of a production application:

    * a retriable error from commit_transaction: call it again (bounded);
    * an abortable error: abort_transaction, then rewind the consumer to the group's committed offsets;
    * a fatal error, or anything that cannot be cleaned up: throw away the producer and the consumer,
      create new ones (init_transactions fences the old instance and ends its transaction), and rewind
      to the committed offsets.

    Now and then (``crash_ratio``) the application "crashes" in the middle of a transaction: it drops
    its clients without ending it, and a new instance with the same transactional.id takes over.

    Each transaction attempt gets a number that is written into every output value, and its outcome as
    the client saw it is recorded (``committed``, ``aborted``, or unknown), so the final read can check
    that aborted data never shows and committed data never vanishes.
    """

    def __init__(
        self,
        bootstrap: str,
        src: str,
        dst: str,
        ends: dict[int, int],
        *,
        seed: int,
        deadline: float,
        max_txns: int,
        max_batch: int = 60,
        abort_ratio: float = 1 / 3,
        crash_ratio: float = 0.03,
        producer_conf: dict[str, Any] | None = None,
        client_conf: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(name="txn-pipeline", daemon=True)
        self.bootstrap = bootstrap
        self.src, self.dst = src, dst
        self.ends = dict(ends)
        self.partitions = sorted(ends)
        self.rng = random.Random(seed)
        self.deadline = deadline
        self.max_txns = max_txns
        self.max_batch = max_batch
        self.abort_ratio = abort_ratio
        self.crash_ratio = crash_ratio
        self.producer_conf = dict(producer_conf or {})
        self.client_conf = dict(client_conf or {})  # both clients': e.g. a secured listener's login
        self.group = f"soak-{uuid.uuid4().hex[:8]}"
        self.tid = f"soak-{uuid.uuid4().hex[:8]}"
        # progress and outcome, read by the main thread
        self.txn_no = 0
        self.commits = 0
        self.aborts = 0  # deliberate aborts that the broker confirmed
        self.crashes = 0  # instances abandoned mid-transaction (an application crash)
        self.committed_txns: dict[int, int] = {}  # txn number -> records in it
        self.aborted_txns: dict[int, int] = {}
        self.unknown_txns: set[int] = set()
        self.committed_offsets: dict[int, int] = {p: 0 for p in self.partitions}
        self.producers_created = 0
        self.consumers_created = 0
        self.rewinds = 0
        self.errors: Counter[str] = Counter()
        self.done = False
        self.crashed: str | None = None  # traceback of a bug in the worker itself
        self._halt = threading.Event()
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._positions: dict[int, int] = {}
        self._need_rewind = True

    # ------------------------------------------------------------------ public
    def stop(self) -> None:
        self._halt.set()

    def successor(self, *, seed: int, txn_no: int) -> TxnPipeline:
        """The same application started again (after this instance stalled in a client call): same
        transactional id and group — its init_transactions fences this instance — with its
        transaction numbers from `txn_no` on, so the outcomes of both can be told apart."""
        nxt = TxnPipeline(self.bootstrap, self.src, self.dst, self.ends, seed=seed, deadline=self.deadline,
                          max_txns=self.max_txns, max_batch=self.max_batch, abort_ratio=self.abort_ratio,
                          crash_ratio=self.crash_ratio, producer_conf=self.producer_conf, client_conf=self.client_conf)
        nxt.tid, nxt.group, nxt.txn_no = self.tid, self.group, txn_no
        return nxt

    @property
    def progress(self) -> tuple[int, ...]:
        """Changes whenever the copier gets anywhere: a transaction attempt, a rewind, a new client,
        input committed. Unchanged for long, the instance is stuck in a client call."""
        return (self.txn_no, self.rewinds, self.producers_created, self.consumers_created, self.processed)

    @property
    def processed(self) -> int:
        return sum(self.committed_offsets.values())

    @property
    def total(self) -> int:
        return sum(self.ends.values())

    def summary(self) -> str:
        return (
            f"pipeline: {self.processed}/{self.total} input committed, {self.txn_no} txn attempts, "
            f"{self.commits} commits, {self.aborts} deliberate aborts, {self.crashes} crashes, {len(self.unknown_txns)} unknown, "
            f"{self.producers_created} producers, {self.consumers_created} consumers, {self.rewinds} rewinds, "
            f"done={self.done}; errors {dict(self.errors.most_common(12))}"
        )

    # ------------------------------------------------------------------ thread body
    def run(self) -> None:
        first_txn = self.txn_no  # a successor's numbers start high: max_txns counts this instance's
        try:
            while not self._halt.is_set() and not self.done:
                if time.monotonic() > self.deadline or self.txn_no - first_txn >= self.max_txns:
                    break
                self._step()
        except BaseException:  # a bug in the worker, not a client error: the test reports it
            self.crashed = traceback.format_exc()
        finally:
            self._discard_producer()
            self._discard_consumer()

    def _note(self, where: str, exc: BaseException) -> KafkaError | None:
        err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        if isinstance(err, KafkaError):
            kind = "fatal" if err.fatal() else "abortable" if err.txn_requires_abort() else (
                "retriable" if err.retriable() else "other")
            self.errors[f"{where}:{err.name()}:{kind}"] += 1
            return err
        self.errors[f"{where}:{type(exc).__name__}"] += 1
        return None

    def _step(self) -> None:
        if self._producer is None and not self._make_producer():
            return
        if self._consumer is None:
            self._make_consumer()
        if self._need_rewind and not self._rewind():
            return
        assert self._consumer is not None and self._producer is not None
        msgs = []
        try:
            batch = self._consumer.consume(self.rng.randint(1, self.max_batch), 0.5)
        except KafkaException as exc:
            self._note("consume", exc)
            self._discard_consumer()
            self._need_rewind = True
            return
        for m in batch:
            err = m.error()
            if err is None:
                msgs.append(m)
            elif err.code() != KafkaError._PARTITION_EOF:
                self.errors[f"consume:{err.name()}"] += 1
                if err.fatal():
                    self._discard_consumer()
                    self._need_rewind = True
                    return
        if not msgs:
            return
        expect = dict(self._positions)
        for m in msgs:
            if m.offset() < expect.get(m.partition(), 0):
                # The consumer went back (a position reset under faults): copying this would put
                # inputs in the output twice, in one transaction or across two. Start over from
                # what the group committed instead.
                self.errors["consume:went-back"] += 1
                self._discard_consumer()
                self._need_rewind = True
                return
            expect[m.partition()] = m.offset() + 1
        self._transaction(msgs)

    def _transaction(self, msgs: list[Any]) -> None:
        assert self._consumer is not None and self._producer is not None
        producer, consumer = self._producer, self._consumer
        self.txn_no += 1
        no = self.txn_no
        abort = self.rng.random() < self.abort_ratio
        crash = not abort and self.rng.random() < self.crash_ratio
        positions = dict(self._positions)
        for m in msgs:
            positions[m.partition()] = m.offset() + 1
        stage = "begin"
        try:
            producer.begin_transaction()
            stage = "produce"
            for m in msgs:
                self._produce(producer, out_value(no, m.value()), m.partition())
            stage = "send_offsets"
            producer.send_offsets_to_transaction(
                [TopicPartition(self.src, p, off) for p, off in sorted(positions.items())],
                consumer.consumer_group_metadata(),
                OP_TIMEOUT,
            )
            if crash:
                stage = "flush"
                if producer.flush(OP_TIMEOUT) != 0:
                    raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "flush before crash timed out"))
                # The application dies here: no abort, no commit. The next instance's
                # init_transactions must fence this one and abort what it left open.
                self.crashes += 1
                self.aborted_txns[no] = len(msgs)
                self._need_rewind = True
                self._discard_producer()
                self._discard_consumer()
                return
            if abort:
                stage = "flush"
                # The aborted records must really reach the log, not be dropped client-side.
                if producer.flush(OP_TIMEOUT) != 0:
                    raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "flush before abort timed out"))
                stage = "abort"
                producer.abort_transaction(OP_TIMEOUT)
                self.aborts += 1
                self.aborted_txns[no] = len(msgs)
                self._need_rewind = True
                return
            stage = "commit"
            self._commit(producer)
        except KafkaException as exc:
            self._recover(stage, exc, no)
            return
        self.commits += 1
        self.committed_txns[no] = len(msgs)
        self._positions = positions
        self.committed_offsets.update(positions)
        if all(self.committed_offsets.get(p, 0) >= end for p, end in self.ends.items()):
            self.done = True

    def _produce(self, producer: Producer, value: bytes, partition: int) -> None:
        while True:
            try:
                producer.produce(self.dst, value=value, partition=partition)
                return
            except BufferError:
                producer.poll(0.05)

    def _commit(self, producer: Producer) -> None:
        commit(producer, OP_TIMEOUT, lambda exc: self._note("commit-retry", exc))

    def _recover(self, stage: str, exc: KafkaException, no: int) -> None:
        err = self._note(stage, exc)
        self._need_rewind = True
        if err is not None and err.txn_requires_abort() and not err.fatal():
            try:
                assert self._producer is not None
                self._producer.abort_transaction(OP_TIMEOUT)
                self.aborted_txns[no] = -1  # aborted after an error: none of it may be visible
                return
            except KafkaException as abort_exc:
                self._note("abort-after-error", abort_exc)
        # Fatal, or a transaction in an unknown state (e.g. commit timed out): start afresh. The new
        # producer's init_transactions completes or aborts whatever the old one left behind.
        self.unknown_txns.add(no)
        self._discard_producer()
        self._discard_consumer()

    # ------------------------------------------------------------------ clients
    def _make_producer(self) -> bool:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.tid,
                "linger.ms": 5,
                "transaction.timeout.ms": 30_000,
                **NO_REBOOTSTRAP,
                **IDLE_CLOSE,
                **QUIET,
                **({"debug": CLIENT_DEBUG, "log_level": 7} if CLIENT_DEBUG else {}),
                **self.client_conf,
                **self.producer_conf,
            }
        )
        self.producers_created += 1
        for _ in range(5):
            try:
                p.init_transactions(OP_TIMEOUT)
                self._producer = p
                return True
            except KafkaException as exc:
                err = self._note("init", exc)
                if err is None or err.fatal() or not err.retriable():
                    break
            if self._halt.is_set() or time.monotonic() > self.deadline:
                break
        return False

    def _make_consumer(self) -> None:
        self._consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 50,
                **NO_REBOOTSTRAP,
                **QUIET,
                **self.client_conf,
            }
        )
        self.consumers_created += 1
        self._need_rewind = True

    def _rewind(self) -> bool:
        """Reassign every input partition at the offset the group has committed."""
        assert self._consumer is not None
        try:
            got = self._consumer.committed([TopicPartition(self.src, p) for p in self.partitions], timeout=10)
        except KafkaException as exc:
            err = self._note("committed", exc)
            if err is not None and err.fatal():
                self._discard_consumer()
            return False
        bad = [tp for tp in got if tp.error is not None]
        if bad:
            self.errors[f"committed:{bad[0].error.name()}"] += 1
            return False
        offsets = {tp.partition: tp.offset for tp in got}
        try:
            self._consumer.assign(
                [TopicPartition(self.src, p, off if off >= 0 else OFFSET_BEGINNING) for p, off in offsets.items()]
            )
        except KafkaException as exc:
            self._note("assign", exc)
            self._discard_consumer()
            return False
        self._positions = {p: max(off, 0) for p, off in offsets.items()}
        # The client learns durably committed progress here too (a commit whose answer was lost).
        for p, off in self._positions.items():
            self.committed_offsets[p] = off
        self.rewinds += 1
        self._need_rewind = False
        if all(self.committed_offsets.get(p, 0) >= end for p, end in self.ends.items()):
            self.done = True
        return True

    def _discard_producer(self) -> None:
        p, self._producer = self._producer, None
        if p is not None:
            try:
                p.purge()
            except Exception:  # noqa: BLE001 - a broken producer is being thrown away
                pass
            del p

    def _discard_consumer(self) -> None:
        c, self._consumer = self._consumer, None
        if c is not None:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass


# --------------------------------------------------------------------- idempotent producer stream


class IdempotentStream(threading.Thread):
    """Produces ``m-<i>`` values with ``acks=all`` and idempotence until stopped, recording the
    (partition, offset) of every acknowledged message and every delivery error."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, *, max_messages: int) -> None:
        super().__init__(name="idempotent-stream", daemon=True)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.max_messages = max_messages
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed: dict[bytes, str] = {}
        self.fatal: list[str] = []
        self.sent = 0
        self.unflushed = -1
        self.crashed: str | None = None
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        try:
            self._run()
        except BaseException:
            self.crashed = traceback.format_exc()

    def _callback(self, value: bytes) -> Any:
        def cb(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                self.failed[value] = err.name()
                if err.fatal():
                    self.fatal.append(err.str())
            else:
                assert value not in self.acked, f"{value!r} acknowledged twice"
                self.acked[value] = (msg.partition(), msg.offset())

        return cb

    def _run(self) -> None:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "queue.buffering.max.messages": 20_000,
                **QUIET,
            }
        )
        i = 0
        while not self._halt.is_set() and i < self.max_messages and not self.fatal:
            value = b"m-%d" % i
            try:
                p.produce(self.topic, value=value, key=b"k-%d" % (i % 97), on_delivery=self._callback(value))
            except BufferError:
                p.poll(0.05)
                continue
            i += 1
            self.sent = i
            p.poll(0)
        self.unflushed = p.flush(120)


# ------------------------------------------------------------------------------- final judgement


def find_hanging(bootstrap: str) -> list[dict[str, Any]]:
    """``ketch txn find-hanging --json`` over every topic, counting any open transaction that its
    coordinator does not know about as hanging, however young (max transaction timeout 0)."""
    res = subprocess.run(
        [sys.executable, "-m", "broker", "txn", "find-hanging", "--bootstrap", bootstrap, "--json",
         "--max-transaction-timeout-ms", "0"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )
    assert res.returncode == 0, f"find-hanging failed ({res.returncode}): {res.stderr}{res.stdout}"
    out = json.loads(res.stdout or "[]")
    assert isinstance(out, list), res.stdout
    return out
