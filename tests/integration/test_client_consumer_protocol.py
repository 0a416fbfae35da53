"""The bundled Consumer with group_protocol="consumer" (KIP-848) against a real Ketch broker: two
members share a topic with no partition held by both at once and every record consumed once with
commit-after-process, one member closing hands its partitions to the other; a static member
restarted takes its own partitions back without the other member noticing; a bundled member and a
confluent-kafka `group.protocol=consumer` one share a group."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from helpers import BrokerProcess, unique_topic
from helpers.consumer_protocol import FAST_CONSUMER_GROUPS, ProtocolConsumer, describe_group
from helpers.wait import wait_until_async

from client import Admin, Consumer, Producer, TopicPartition

PARTITIONS = 4


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("client-kip848") / "data", env=FAST_CONSUMER_GROUPS)
    b.start()
    yield b
    b.close()


async def setup(bs: str, prefix: str) -> str:
    topic = unique_topic(prefix)
    async with Admin(bs) as admin:
        await admin.create_topic(topic, PARTITIONS)
    return topic


async def produce(bs: str, topic: str, first: int, n: int) -> set[bytes]:
    async with Producer(bs) as p:
        for i in range(first, first + n):
            await p.send(topic, b"v%d" % i, partition=i % PARTITIONS)
        await p.flush()
    return {b"v%d" % i for i in range(first, first + n)}


class Owners:
    """Who holds each partition, from the members' listeners: they run on one event loop, so their
    order is the order things happened in. A partition given to a member while another still holds
    it is recorded as a conflict."""

    def __init__(self) -> None:
        self.holder: dict[TopicPartition, str] = {}
        self.conflicts: list[str] = []
        self.history: dict[str, list[set[TopicPartition]]] = {}

    def listener(self, name: str) -> Listener:
        return Listener(self, name)

    def held_by(self, name: str) -> set[TopicPartition]:
        return {tp for tp, n in self.holder.items() if n == name}


class Listener:
    def __init__(self, owners: Owners, name: str) -> None:
        self.owners, self.name = owners, name
        self.revoked: list[set[TopicPartition]] = []

    def _note(self) -> None:
        self.owners.history.setdefault(self.name, []).append(self.owners.held_by(self.name))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        for tp in assigned:
            other = self.owners.holder.get(tp)
            if other is not None and other != self.name:
                self.owners.conflicts.append(f"{tp} given to {self.name} while {other} holds it")
            self.owners.holder[tp] = self.name
        self._note()

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.revoked.append(set(revoked))
        for tp in revoked:
            if self.owners.holder.get(tp) == self.name:
                del self.owners.holder[tp]
        self._note()

    on_partitions_lost = on_partitions_revoked


class Member:
    """A bundled consumer polling in its own task, as an application would: read, process (record),
    commit, repeat."""

    def __init__(self, c: Consumer, name: str) -> None:
        self.c, self.name = c, name
        self.consumed: list[tuple[TopicPartition, int, bytes]] = []
        self.stopping = False
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while not self.stopping:  # 3.11's wait_for may swallow the cancellation (docs/client.md)
            batches = await self.c.getmany(timeout_ms=100)
            for tp, recs in batches.items():
                self.consumed.extend((tp, r.offset, r.value or b"") for r in recs)
            if batches:
                await self.c.commit()

    def check(self) -> None:
        if self.task.done():
            self.task.result()  # raises what stopped it
            raise AssertionError(f"{self.name} stopped")

    async def stop(self) -> None:
        self.stopping = True
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def consumer(bs: str, group: str, **kw: object) -> Consumer:
    return Consumer(bs, group_id=group, group_protocol="consumer", auto_offset_reset="earliest",
                    enable_auto_commit=False, fetch_max_wait_ms=100, **kw)  # type: ignore[arg-type]


async def until(cond: Callable[[], object], members: list[Member], message: str, timeout: float = 60) -> None:
    def check() -> object:
        for m in members:
            m.check()
        return cond()
    await wait_until_async(check, timeout=timeout, interval=0.1, message=message)


def everything(topic: str) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in range(PARTITIONS)}


async def test_two_members_share_then_one_hands_over_on_close(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic, group = await setup(bs, "c848"), unique_topic("g")
    owners = Owners()
    a_c, b_c = consumer(bs, group), consumer(bs, group)
    await a_c.start()
    await b_c.start()
    a_c.subscribe([topic], listener=owners.listener("a"))
    a = Member(a_c, "a")
    await until(lambda: a_c.assignment() == everything(topic), [a], "a alone owns every partition")
    sent = await produce(bs, topic, 0, 200)
    b_c.subscribe([topic], listener=owners.listener("b"))
    b = Member(b_c, "b")
    try:
        await until(lambda: len(a_c.assignment()) == 2 and len(b_c.assignment()) == 2, [a, b],
                    "two partitions each")
        assert a_c.assignment() | b_c.assignment() == everything(topic)
        sent |= await produce(bs, topic, 200, 200)
        await until(lambda: len(a.consumed) + len(b.consumed) >= len(sent), [a, b], "every record read")
        handed = set(a_c.assignment())
        d = describe_group(bs, group)
        assert d["type"] == "consumer" and len(d["members"]) == 2, d
        await a.stop()
        await a_c.close()  # leaves with epoch -1: b gets a's partitions at once
        await until(lambda: b_c.assignment() == everything(topic), [b], "b owns every partition")
        sent |= await produce(bs, topic, 400, 200)
        await until(lambda: len(a.consumed) + len(b.consumed) >= len(sent), [b], "every record read")
    finally:
        await a.stop()
        await b.stop()
        await a_c.close()
        await b_c.close()
    assert not owners.conflicts, owners.conflicts
    values = Counter(v for m in (a, b) for _, _, v in m.consumed)
    assert [v for v, n in values.items() if n > 1] == [], "records consumed more than once"
    assert set(values) == sent
    assert any(tp in handed for tp, _, _ in b.consumed), "b read nothing of what a handed over"
    # a gave up what b took before b took it, then the rest when it closed
    assert owners.history["a"][0] == everything(topic)
    assert owners.history["a"][-2:] == [handed, set()], owners.history["a"]
    assert owners.history["b"][-2:] == [everything(topic), set()], owners.history["b"]
    for tp, _, _ in a.consumed:
        assert tp in owners.history["a"][0]


async def test_a_static_member_restarted_keeps_its_partitions(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic, group = await setup(bs, "c848-static"), unique_topic("g")
    owners = Owners()
    s_c, d_c = consumer(bs, group, group_instance_id="static-1"), consumer(bs, group)
    await s_c.start()
    await d_c.start()
    s_c.subscribe([topic], listener=owners.listener("s"))
    d_listener = owners.listener("d")
    d_c.subscribe([topic], listener=d_listener)
    s, d = Member(s_c, "s"), Member(d_c, "d")
    try:
        await until(lambda: len(s_c.assignment()) == 2 and len(d_c.assignment()) == 2, [s, d], "two each")
        kept, d_kept = set(s_c.assignment()), set(d_c.assignment())
        revocations = len(d_listener.revoked)
        old_id = s_c.member_id
        await s.stop()
        await s_c.close()  # epoch -2: the place waits for the instance
        assert describe_group(bs, group)["members"], "the group is empty"
        s_c = consumer(bs, group, group_instance_id="static-1")
        await s_c.start()
        s_c.subscribe([topic], listener=owners.listener("s2"))
        s = Member(s_c, "s2")
        await until(lambda: s_c.assignment() == kept, [s, d], f"the static member back with {kept}")
        assert s_c.member_id != old_id  # a new incarnation took the old one's place
        assert d_c.assignment() == d_kept and len(d_listener.revoked) == revocations, "d saw a rebalance"
        members = describe_group(bs, group)["members"]
        assert len(members) == 2, members
    finally:
        await s.stop()
        await d.stop()
        await s_c.close()
        await d_c.close()
    assert not owners.conflicts, owners.conflicts


async def test_a_bundled_and_a_confluent_member_share_a_group(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic, group = await setup(bs, "c848-mixed"), unique_topic("g")
    ours_c = consumer(bs, group)
    await ours_c.start()
    ours_c.subscribe([topic])
    ours = Member(ours_c, "ours")
    theirs = ProtocolConsumer(bs, group, [topic], "confluent")
    try:
        await until(lambda: len(ours_c.assignment()) == 2 and len(theirs.assignment()) == 2, [ours],
                    "two partitions each")
        assert {(tp.topic, tp.partition) for tp in ours_c.assignment()} | theirs.assignment() == {
            (topic, p) for p in range(PARTITIONS)}
        sent = await produce(bs, topic, 0, 200)
        await until(lambda: len(ours.consumed) + theirs.count() >= len(sent), [ours], "every record read")
        assert {(tp.topic, tp.partition) for tp, _, _ in ours.consumed} <= {
            (tp.topic, tp.partition) for tp in ours_c.assignment()}
        await asyncio.to_thread(theirs.close)  # confluent-kafka leaves: its partitions come to us
        await until(lambda: ours_c.assignment() == everything(topic), [ours], "ours owns every partition")
        sent |= await produce(bs, topic, 200, 200)
        await until(lambda: len(ours.consumed) + theirs.count() >= len(sent), [ours], "every record read")
    finally:
        await ours.stop()
        await ours_c.close()
        if theirs.is_alive():
            await asyncio.to_thread(theirs.close)
    values = Counter([v for _, _, v in ours.consumed] + [v for _, _, _, v in theirs.consumed])
    assert [v for v, n in values.items() if n > 1] == [], "records consumed more than once"
    assert set(values) == sent
    assert not theirs.commit_errors, theirs.commit_errors


async def test_a_pattern_subscription_reads_topics_created_later(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    prefix, group = unique_topic("c848re"), unique_topic("g")
    c = consumer(bs, group)
    await c.start()
    c.subscribe(pattern=f"{prefix}-.*")
    member = Member(c, "re")
    try:
        first = f"{prefix}-a"
        async with Admin(bs) as admin:
            await admin.create_topic(first, PARTITIONS)
            await admin.create_topic(f"other-{prefix}", 1)  # not matched
        await until(lambda: c.assignment() == everything(first), [member], f"the partitions of {first}")
        second = f"{prefix}-b"
        async with Admin(bs) as admin:
            await admin.create_topic(second, PARTITIONS)
        await until(lambda: c.assignment() == everything(first) | everything(second), [member],
                    f"the partitions of {first} and {second}")
        sent = await produce(bs, second, 0, 40)
        await until(lambda: {v for _, _, v in member.consumed} >= sent, [member], f"the records of {second}")
    finally:
        await member.stop()
        await c.close()
