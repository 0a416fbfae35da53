"""Consumer groups with the bundled client against a real Ketch broker: range and cooperative-sticky
rebalances with the listener, commits, admin views of the group, a mixed group with a
confluent-kafka member (the ConsumerProtocol bytes must be understood both ways), static
membership across a restart, and deleting groups."""

from __future__ import annotations

import asyncio

import confluent_kafka
from helpers import BrokerProcess, unique_topic

from client import Admin, Consumer, Producer, TopicPartition
from protocol.errors import ErrorCode


async def setup(bs: str, topic: str, partitions: int, n: int = 0) -> None:
    async with Admin(bs) as admin:
        await admin.create_topic(topic, partitions)
    if n:
        async with Producer(bs) as p:
            for i in range(n):
                await p.send(topic, b"%d" % i, partition=i % partitions)
            await p.flush()


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append(("revoked", set(revoked)))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append(("assigned", set(assigned)))


async def poll_until(consumers: list[Consumer], cond, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """Each consumer polls in its own task (as each would in its own process): a member blocked in
    JoinGroup must not stop the others from answering the rebalance."""
    done = asyncio.Event()

    async def loop(c: Consumer) -> None:
        while not done.is_set():
            await c.getmany(timeout_ms=100)
            if cond():
                done.set()

    tasks = [asyncio.ensure_future(loop(c)) for c in consumers]
    try:
        await asyncio.wait_for(done.wait(), timeout)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_range_group_splits_partitions_and_commits(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic, group = unique_topic("grp-range"), unique_topic("g")
    await setup(bs, topic, 4, 40)
    kw = dict(group_id=group, auto_offset_reset="earliest", enable_auto_commit=False, assignors=("range",),
              heartbeat_interval_ms=200, session_timeout_ms=6000)
    async with Consumer(bs, **kw) as a, Consumer(bs, **kw) as b:  # type: ignore[arg-type]
        a.subscribe([topic])
        b.subscribe([topic])
        await poll_until([a, b], lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2)
        assert a.assignment() | b.assignment() == {TopicPartition(topic, p) for p in range(4)}
        tp = sorted(a.assignment())[0]
        await a.commit({tp: 7})
        assert await a.committed(tp) == 7
        assert await b.committed(tp) == 7
        async with Admin(bs) as admin:
            desc = (await admin.describe_groups([group]))[group]
            assert desc.state == "Stable" and desc.protocol == "range" and len(desc.members) == 2
            assert {tp for m in desc.members for tp in m.assignment} == a.assignment() | b.assignment()
            assert group in {g.group_id for g in await admin.list_groups()}


async def test_cooperative_sticky_rebalance_revokes_only_what_moves(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic, group = unique_topic("grp-coop"), unique_topic("g")
    await setup(bs, topic, 6, 60)
    kw = dict(group_id=group, auto_offset_reset="earliest", assignors=("cooperative-sticky",),
              heartbeat_interval_ms=200, session_timeout_ms=6000)
    ra, rb = Recorder(), Recorder()
    async with Consumer(bs, **kw) as a:  # type: ignore[arg-type]
        a.subscribe([topic], listener=ra)
        await poll_until([a], lambda: len(a.assignment()) == 6)
        before = set(a.assignment())
        async with Consumer(bs, **kw) as b:  # type: ignore[arg-type]
            b.subscribe([topic], listener=rb)
            await poll_until([a, b], lambda: len(a.assignment()) == 3 and len(b.assignment()) == 3)
            assert a.assignment() | b.assignment() == before
            revoked = [tps for kind, tps in ra.events if kind == "revoked"]
            # a gave up exactly the three partitions b got, and never the ones it kept
            assert set().union(*revoked) == b.assignment()
            assert not (set().union(*revoked) & a.assignment())
        # b left: a gets everything back without revoking what it held
        await poll_until([a], lambda: len(a.assignment()) == 6)
        assert [kind for kind, _ in ra.events].count("revoked") == len(revoked)


async def test_mixed_group_with_confluent_kafka(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic, group = unique_topic("grp-mixed"), unique_topic("g")
    await setup(bs, topic, 4, 40)
    ck = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                                   "partition.assignment.strategy": "range", "log_level": 3,
                                   "heartbeat.interval.ms": 200, "session.timeout.ms": 6000})
    ck.subscribe([topic])
    ck_assigned: set[TopicPartition] = set()
    try:
        async with Consumer(bs, group_id=group, auto_offset_reset="earliest", assignors=("range",),
                            heartbeat_interval_ms=200, session_timeout_ms=6000) as ours:
            ours.subscribe([topic])

            def settled() -> bool:
                ck.poll(0.05)
                ck_assigned.clear()
                ck_assigned.update(TopicPartition(t.topic, t.partition) for t in ck.assignment())
                return len(ck_assigned) == 2 and len(ours.assignment()) == 2

            async def loop() -> None:
                while not settled():
                    await ours.getmany(timeout_ms=100)

            await asyncio.wait_for(loop(), 60)
            assert ck_assigned | ours.assignment() == {TopicPartition(topic, p) for p in range(4)}
    finally:
        ck.close()


async def test_static_member_restart_keeps_its_partitions_without_a_rebalance(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """KIP-345: a member with a group_instance_id that restarts within its session timeout takes
    its old place. The coordinator hands it the same partitions at the same generation, and the
    other member is never asked to rebalance. Done for the leader, then for the follower."""
    bs = broker_factory(env={"KETCH_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"}).bootstrap
    topic, group = unique_topic("grp-static"), unique_topic("g")
    await setup(bs, topic, 4, 40)

    def static(instance: str) -> Consumer:
        return Consumer(bs, group_id=group, group_instance_id=instance, auto_offset_reset="earliest",
                        assignors=("range",), heartbeat_interval_ms=200, session_timeout_ms=20_000)

    recorders = {"a": Recorder(), "b": Recorder()}
    members = {"a": static("a"), "b": static("b")}
    await members["a"].start()
    members["a"].subscribe([topic], listener=recorders["a"])
    await poll_until([members["a"]], lambda: len(members["a"].assignment()) == 4)  # a joins first: the leader
    await members["b"].start()
    members["b"].subscribe([topic], listener=recorders["b"])
    try:
        await poll_until(list(members.values()), lambda: all(len(c.assignment()) == 2 for c in members.values()))
        generation = members["a"].group_metadata().generation_id
        assert members["b"].group_metadata().generation_id == generation
        held = {name: set(c.assignment()) for name, c in members.items()}
        async with Admin(bs) as admin:
            ids_before = {m.group_instance_id: m.member_id for m in (await admin.describe_groups([group]))[group].members}
        for name, other in (("a", "b"), ("b", "a")):
            await members[name].close()  # a static member sends no LeaveGroup: its place is kept
            events_of_other = list(recorders[other].events)
            recorders[name] = Recorder()
            members[name] = static(name)
            await members[name].start()
            members[name].subscribe([topic], listener=recorders[name])
            await poll_until(list(members.values()), lambda n=name: len(members[n].assignment()) == 2)  # type: ignore[misc]
            assert members[name].assignment() == held[name]
            # the join answered at the old generation: had it started a rebalance, the answer would
            # have waited for the other member to rejoin and carried a new generation
            assert members[name].group_metadata().generation_id == generation
            assert recorders[name].events == [("assigned", held[name])]
            assert recorders[other].events == events_of_other  # nothing revoked, nothing reassigned
            assert members[other].assignment() == held[other]
            assert members[other].group_metadata().generation_id == generation
        async with Admin(bs) as admin:
            desc = (await admin.describe_groups([group]))[group]
        assert desc.state == "Stable"
        ids_after = {m.group_instance_id: m.member_id for m in desc.members}
        assert set(ids_after) == {"a", "b"}
        assert all(ids_after[i] != ids_before[i] for i in ("a", "b"))  # replaced in place, new member ids
        assert {m.group_instance_id: set(m.assignment) for m in desc.members} == held
    finally:
        for c in members.values():
            await c.close()


async def test_delete_groups(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic, group, busy = unique_topic("grp-del"), unique_topic("g"), unique_topic("g-busy")
    await setup(bs, topic, 2, 10)
    tp = TopicPartition(topic, 0)
    async with Consumer(bs, group_id=group, enable_auto_commit=False) as c:
        await c.commit({tp: 5})
    async with Consumer(bs, group_id=busy, heartbeat_interval_ms=200, session_timeout_ms=6000,
                        auto_offset_reset="earliest") as member:
        member.subscribe([topic])
        await poll_until([member], lambda: len(member.assignment()) == 2)
        async with Admin(bs) as admin:
            assert group in {g.group_id for g in await admin.list_groups()}
            result = await admin.delete_groups([group, busy, unique_topic("never-existed")])
            assert result[group] is None
            assert result[busy] is not None and result[busy].code is ErrorCode.NON_EMPTY_GROUP
            unknown = [e for g, e in result.items() if g not in (group, busy)]
            assert len(unknown) == 1 and unknown[0] is not None and unknown[0].code is ErrorCode.GROUP_ID_NOT_FOUND
            listed = {g.group_id for g in await admin.list_groups()}
            assert group not in listed and busy in listed
    async with Consumer(bs, group_id=group) as c:
        assert await c.committed(tp) is None  # its offsets went with it
