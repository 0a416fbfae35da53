"""Consumer groups with real clients: sharing partitions, taking over, committing, mixing clients.

Each member runs in its own thread, as separate applications would (poll, process, commit
synchronously); the test watches what they own and what they consumed. The group only settles
if the coordinator gets every rebalance right.

Data is produced only once the group is stable, so a commit never races a rebalance: under those
conditions "commit after processing" must give exactly-once consumption, and any duplicate or
gap is the coordinator's fault.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, KafkaException, TopicPartition
from helpers import BrokerProcess, make_messages, unique_topic, wait_until
from helpers.confluent import QUIET, create_topic, produce

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer

pytestmark = pytest.mark.compat

PARTITIONS = 6
PER_PHASE = 300
SESSION_MS = 10_000
HEARTBEAT_MS = 300
MAX_POLL_MS = 30_000  # also the rebalance timeout: a member that never rejoins costs at most this
FAST_GROUPS = {"KETCH_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"}

Polled = tuple[int, int, bytes]  # partition, offset, value


class Member(threading.Thread):
    """One consumer in its own thread, as in a real deployment: poll, process (record), commit
    synchronously, repeat. The test thread only watches `consumed` and `assigned`.

    Polls are long enough for a whole rebalance to complete inside one poll: kafka-python sends a
    fresh JoinGroup if a join finishes while nobody is polling, and from a leader that starts a new
    rebalance (Kafka does the same), so short polls make it rebalance for ever.
    """

    def __init__(self, kind: str, bootstrap: str, group: str, topic: str, **conf: Any) -> None:
        super().__init__(name=f"member-{kind}", daemon=True)
        self.kind, self.bootstrap, self.group, self.topic, self.conf = kind, bootstrap, group, topic, conf
        self.lock = threading.Lock()
        self.consumed: list[Polled] = []
        self.assigned: set[int] = set()
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.start()

    def assignment(self) -> set[int]:
        with self.lock:
            return set(self.assigned)

    def _record(self, out: list[Polled], assigned: set[int]) -> None:
        with self.lock:
            self.consumed.extend(out)
            self.assigned = assigned

    def close(self) -> None:
        self.stopping.set()
        self.join(60)
        assert not self.is_alive(), f"{self.kind} member did not stop"
        if self.error is not None:
            raise AssertionError(f"{self.kind} member failed: {self.error!r}") from self.error

    def run(self) -> None:
        try:
            if self.kind == "aiokafka":
                asyncio.run(self._run_aiokafka())
            elif self.kind == "confluent":
                self._run_confluent()
            else:
                self._run_kafka_python()
        except BaseException as e:  # reported by close()
            self.error = e

    def _run_confluent(self) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "max.poll.interval.ms": MAX_POLL_MS,
                "fetch.wait.max.ms": 50,
                **QUIET,
                **self.conf,
            }
        )
        try:
            c.subscribe([self.topic])
            while not self.stopping.is_set():
                out = []
                for m in c.consume(500, 0.2):
                    if m.error():
                        raise KafkaException(m.error())
                    out.append((m.partition(), m.offset(), m.value()))
                if out:
                    c.commit(asynchronous=False)
                self._record(out, {tp.partition for tp in c.assignment()})
        finally:
            c.close()

    def _run_kafka_python(self) -> None:
        c = KafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=MAX_POLL_MS,
            fetch_max_wait_ms=50,
        )
        try:
            while not self.stopping.is_set():
                out = [
                    (r.partition, r.offset, r.value)
                    for recs in c.poll(timeout_ms=2000).values()
                    for r in recs
                ]
                if out:
                    c.commit()
                self._record(out, {tp.partition for tp in c.assignment()})
        finally:
            c.close()

    async def _run_aiokafka(self) -> None:
        c = AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=MAX_POLL_MS,
            rebalance_timeout_ms=MAX_POLL_MS,
            fetch_max_wait_ms=50,
        )
        await c.start()
        try:
            while not self.stopping.is_set():
                batches = await c.getmany(timeout_ms=200)
                out = [(r.partition, r.offset, r.value) for recs in batches.values() for r in recs]
                if out:
                    await c.commit()
                self._record(out, {tp.partition for tp in c.assignment()})
        finally:
            await c.stop()


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    b = BrokerProcess(tmp_path_factory.mktemp("groups") / "data", env=FAST_GROUPS)
    b.start()
    yield b
    b.close()


def _settled(members: list[Member], sizes: list[int]) -> Callable[[], bool]:
    """The assignment has the given shape and covers every partition exactly once."""

    def cond() -> bool:
        for m in members:
            if m.error is not None:
                raise AssertionError(f"{m.kind} member failed: {m.error!r}")
        owned = [m.assignment() for m in members]
        flat = [p for s in owned for p in s]
        return sorted(len(s) for s in owned) == sorted(sizes) and sorted(flat) == list(range(PARTITIONS))

    return cond


def _total(members: list[Member]) -> int:
    return sum(len(m.consumed) for m in members)


def _share_take_over_and_consume_once(broker: BrokerProcess, kinds: list[str]) -> None:
    topic = unique_topic("groups")
    group = f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    msgs = make_messages(2 * PER_PHASE, seed=7)
    members = [Member(kind, broker.bootstrap, group, topic) for kind in kinds]
    everyone = list(members)
    try:
        wait_until(
            _settled(members, [2, 2, 2]),
            timeout=60,
            message=lambda: f"three members with two partitions each: {[m.assignment() for m in members]}",
        )
        produce(broker.bootstrap, topic, msgs[:PER_PHASE])
        wait_until(
            lambda: _total(members) >= PER_PHASE,
            timeout=60,
            message=lambda: f"first {PER_PHASE} messages (have {_total(members)})",
        )
        for m in members:  # each member read only from the partitions it owns
            assert {p for p, _, _ in m.consumed} <= m.assignment(), m.kind
        leaver = members.pop()
        leaver.close()
        wait_until(
            _settled(members, [3, 3]),
            timeout=60,
            message=lambda: f"two members with three partitions each: {[m.assignment() for m in members]}",
        )
        taken_over = leaver.assigned
        produce(broker.bootstrap, topic, msgs[PER_PHASE:])
        wait_until(
            lambda: _total(everyone) >= 2 * PER_PHASE,
            timeout=60,
            message=lambda: f"all {2 * PER_PHASE} messages (have {_total(everyone)})",
        )
    finally:
        for m in members:
            m.close()
    consumed = [c for m in everyone for c in m.consumed]
    values = Counter(v for _, _, v in consumed)
    dupes = [v[:8] for v, n in values.items() if n > 1]
    assert not dupes, f"consumed more than once: {dupes[:5]}"
    assert set(values) == {m.value for m in msgs}, "messages missing"
    # the leaver's partitions went on being consumed, by the others
    assert any(p in taken_over for m in members for p, _, _ in m.consumed)
    # and the group's committed offsets are at the end of every partition
    check = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **QUIET})
    try:
        committed = check.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    finally:
        check.close()
    per_partition = Counter(p for p, _, _ in consumed)
    assert {tp.partition: tp.offset for tp in committed} == {p: per_partition[p] for p in range(PARTITIONS)}


@pytest.mark.parametrize("client", ["confluent", "aiokafka", "kafka-python"])
def test_three_members_share_then_two_take_over(group_broker: BrokerProcess, client: str) -> None:
    _share_take_over_and_consume_once(group_broker, [client] * 3)


def test_group_of_mixed_clients_rebalances(group_broker: BrokerProcess) -> None:
    # each client's default assignors: the coordinator must pick the one protocol all support
    _share_take_over_and_consume_once(group_broker, ["confluent", "aiokafka", "kafka-python"])


def test_cooperative_sticky_confluent_members(group_broker: BrokerProcess) -> None:
    """Incremental rebalancing: members rejoin with their owned partitions in the metadata (a
    change the coordinator must treat as a reason to rebalance) and keep what they own."""
    topic = unique_topic("coop")
    group = f"g-{uuid.uuid4().hex[:8]}"
    create_topic(group_broker.bootstrap, topic, PARTITIONS)
    coop = {"partition.assignment.strategy": "cooperative-sticky"}
    members = [Member("confluent", group_broker.bootstrap, group, topic, **coop) for _ in range(2)]
    try:
        wait_until(
            _settled(members, [3, 3]),
            timeout=60,
            message=lambda: f"two cooperative members: {[m.assignment() for m in members]}",
        )
        before = [m.assignment() for m in members]
        members.append(Member("confluent", group_broker.bootstrap, group, topic, **coop))
        wait_until(
            _settled(members, [2, 2, 2]),
            timeout=60,
            message=lambda: f"three cooperative members: {[m.assignment() for m in members]}",
        )
        # sticky: the first two kept two of their three partitions each
        assert all(len(members[i].assignment() & before[i]) == 2 for i in range(2))
    finally:
        for m in members:
            m.close()
