"""The group coordinator in a real broker process: durability, session expiry, bad input, size limit.

Raw protocol requests (helpers.raw) where the exact error code matters; confluent-kafka (or the
bundled client) where a real consumer's behaviour is the point.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from helpers import BrokerProcess, make_messages, unique_topic, wait_until
from helpers.confluent import QUIET, create_topic, list_offsets, produce
from helpers.raw import Raw

import client
from protocol.errors import ErrorCode as E
from protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse
from protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberIdentity
from protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
)
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment, SyncGroupResponse

FAST = {"KETCH_GROUP_INITIAL_REBALANCE_DELAY_MS": "0", "KETCH_GROUP_MIN_SESSION_TIMEOUT_MS": "1000"}
PROTOCOLS = [JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01raw")]


@pytest.fixture
def raw_broker(broker_factory) -> BrokerProcess:  # type: ignore[no-untyped-def]
    return broker_factory(env={**FAST, "KETCH_FLUSH_MESSAGES": "1"})


@pytest.fixture
def raw(raw_broker: BrokerProcess) -> Iterator[Raw]:
    r = Raw(raw_broker.port)
    yield r
    r.close()


def join(raw: Raw, group: str, member_id: str = "", *, version: int = 5, session: int = 10_000,
         protocol_type: str = "consumer", protocols: list[JoinGroupRequestProtocol] | None = None,
         instance: str | None = None) -> JoinGroupResponse:
    resp = raw.request(JoinGroupRequest(
        group_id=group, session_timeout_ms=session, rebalance_timeout_ms=10_000, member_id=member_id,
        group_instance_id=instance, protocol_type=protocol_type, protocols=protocols or PROTOCOLS), version)
    assert isinstance(resp, JoinGroupResponse)
    return resp


def join_alone(raw: Raw, group: str, version: int = 5) -> JoinGroupResponse:
    """The v4+ two-step join of a group's only member; returns the completed join."""
    first = join(raw, group, version=version)
    assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id
    second = join(raw, group, first.member_id, version=version)
    assert second.error_code == 0, second
    return second


def sync(raw: Raw, group: str, generation: int, member: str, assignments: dict[str, bytes] | None = None,
         version: int = 3) -> SyncGroupResponse:
    resp = raw.request(SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member,
        assignments=[SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in (assignments or {}).items()]),
        version)
    assert isinstance(resp, SyncGroupResponse)
    return resp


def heartbeat(raw: Raw, group: str, generation: int, member: str, version: int = 3) -> int:
    resp = raw.request(HeartbeatRequest(group_id=group, generation_id=generation, member_id=member), version)
    assert isinstance(resp, HeartbeatResponse)
    return resp.error_code


def commit(raw: Raw, group: str, offsets: dict[tuple[str, int], int], generation: int = -1, member: str = "",
           version: int = 7) -> dict[tuple[str, int], int]:
    topics: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                                     committed_metadata="m"))
    resp = raw.request(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member,
        topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()]), version)
    assert isinstance(resp, OffsetCommitResponse)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def fetch(raw: Raw, group: str, tps: list[tuple[str, int]] | None, version: int = 7,
          require_stable: bool = False) -> tuple[int, dict[tuple[str, int], tuple[int, int]]]:
    if version >= 8:
        topics = None if tps is None else [OffsetFetchRequestTopics(name=t, partition_indexes=[p]) for t, p in tps]
        resp = raw.request(OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=group, topics=topics)],
                                              require_stable=require_stable), version)
        assert isinstance(resp, OffsetFetchResponse)
        g = resp.groups[0]
        return g.error_code, {(t.name, p.partition_index): (p.committed_offset, p.error_code)
                              for t in g.topics for p in t.partitions}
    req_topics = None if tps is None else [OffsetFetchRequestTopic(name=t, partition_indexes=[p]) for t, p in tps]
    resp = raw.request(OffsetFetchRequest(group_id=group, topics=req_topics, require_stable=require_stable),
                       version)
    assert isinstance(resp, OffsetFetchResponse)
    return resp.error_code, {(t.name, p.partition_index): (p.committed_offset, p.error_code)
                             for t in resp.topics for p in t.partitions}


# ---- durability ------------------------------------------------------------------------------

def test_committed_offsets_survive_sigkill_and_consumer_resumes(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory(env={**FAST, "KETCH_FLUSH_MESSAGES": "1"})
    topic = unique_topic("resume")
    group = f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, make_messages(300))
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 6000, **QUIET}
    c = Consumer(conf)
    c.subscribe([topic])
    seen: dict[int, int] = {}

    def read_some() -> bool:
        m = c.poll(0.2)
        if m is not None and not m.error():
            seen[m.partition()] = seen.get(m.partition(), 0) + 1
            if sum(seen.values()) % 10 == 0:
                c.commit(asynchronous=False)
        return sum(seen.values()) >= 150

    wait_until(read_some, timeout=60, interval=0, message="150 messages read")  # the 150th was committed
    committed = {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(3)], 10)}
    positions = {p: max(o, 0) for p, o in committed.items()}  # -1001: nothing committed yet
    assert positions == {p: seen.get(p, 0) for p in range(3)}
    ends = {p: latest for p, (_, latest) in list_offsets(broker.bootstrap, topic, 3).items()}
    broker.kill()  # no LeaveGroup, no clean shutdown: the consumer just loses its broker
    c.close()
    broker.start()

    # a fresh consumer of the group starts exactly at the committed offsets
    c2 = Consumer(conf)
    c2.subscribe([topic])
    first: dict[int, int] = {}
    unfinished = {p for p in range(3) if positions[p] < ends[p]}

    def first_offsets() -> bool:
        m = c2.poll(0.2)
        if m is not None and not m.error():
            first.setdefault(m.partition(), m.offset())
        return set(first) == unfinished

    try:
        wait_until(first_offsets, timeout=60, interval=0, message="a message from every unfinished partition")
        after = {tp.partition: tp.offset for tp in c2.committed([TopicPartition(topic, p) for p in range(3)], 10)}
    finally:
        c2.close()
    assert after == committed
    assert first == {p: positions[p] for p in unfinished}


def test_group_generation_and_offsets_reload_after_sigkill(raw_broker: BrokerProcess, raw: Raw) -> None:
    topic = unique_topic("reload")
    create_topic(raw_broker.bootstrap, topic, 2)
    group = "reload-group"
    j = join_alone(raw, group)
    assert sync(raw, group, j.generation_id, j.member_id, {j.member_id: b"A"}).assignment == b"A"
    assert commit(raw, group, {(topic, 0): 11, (topic, 1): 22}, j.generation_id, j.member_id) == {
        (topic, 0): 0, (topic, 1): 0}
    raw.close()
    raw_broker.kill()
    raw_broker.start()
    r2 = Raw(raw_broker.port)
    try:
        # the member and its generation came back from __consumer_offsets: its session goes on
        wait_until(lambda: heartbeat(r2, group, j.generation_id, j.member_id) != E.COORDINATOR_LOAD_IN_PROGRESS,
                   timeout=20, message="groups loaded")
        assert heartbeat(r2, group, j.generation_id, j.member_id) == 0
        assert sync(r2, group, j.generation_id, j.member_id).assignment == b"A"
        assert fetch(r2, group, [(topic, 0), (topic, 1)]) == (0, {(topic, 0): (11, 0), (topic, 1): (22, 0)})
    finally:
        r2.close()


# ---- session timeout -------------------------------------------------------------------------

CONSUMER_SCRIPT = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": 3000,
              "heartbeat.interval.ms": 300, "log_level": 3})
c.subscribe([sys.argv[3]])
last = None
while True:
    c.poll(0.1)
    now = sorted(tp.partition for tp in c.assignment())
    if now != last:
        print("assigned", now, flush=True)
        last = now
"""


def test_member_that_stops_heartbeating_is_removed_after_session_timeout(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory(env=FAST)
    topic = unique_topic("expiry")
    group = f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 6)
    victim = subprocess.Popen([sys.executable, "-c", CONSUMER_SCRIPT, broker.bootstrap, group, topic],
                              stdout=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(victim.stdout.readline, "")),  # type: ignore[union-attr]
                              daemon=True)
    reader.start()
    survivor = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "session.timeout.ms": 3000,
                         "heartbeat.interval.ms": 300, **QUIET})
    survivor.subscribe([topic])
    try:
        def owned() -> set[int]:
            survivor.poll(0.1)
            return {tp.partition for tp in survivor.assignment()}

        wait_until(lambda: len(owned()) == 3 and lines and lines[-1].startswith("assigned [") and
                   lines[-1].count(",") == 2, timeout=60, interval=0, message="the two members splitting 6 partitions")
        victim.kill()  # SIGKILL: no LeaveGroup, its heartbeats just stop
        victim.wait(10)
        killed_at = time.monotonic()
        wait_until(lambda: owned() == set(range(6)), timeout=30, interval=0,
                   message="the survivor to own every partition")
        # it took the session timeout (3 s), not a LeaveGroup, to notice
        assert time.monotonic() - killed_at >= 2.0
    finally:
        if victim.poll() is None:
            victim.kill()
        survivor.close()
    r = Raw(broker.port)
    try:
        resp = r.request(DescribeGroupsRequest(groups=[group]), 5)
        assert isinstance(resp, DescribeGroupsResponse)
        assert resp.groups[0].group_state in ("Empty", "PreparingRebalance")  # the survivor left too
    finally:
        r.close()


# ---- bad input: the right error, nothing stored ----------------------------------------------

def test_unknown_member_stale_generation_wrong_protocol_type(raw_broker: BrokerProcess, raw: Raw) -> None:
    topic = unique_topic("bad")
    create_topic(raw_broker.bootstrap, topic, 1)
    group = "bad-input"
    j = join_alone(raw, group)
    assert sync(raw, group, j.generation_id, j.member_id, {j.member_id: b"x"}).error_code == 0
    g = j.generation_id
    # unknown member id
    assert join(raw, group, "nobody").error_code == E.UNKNOWN_MEMBER_ID
    assert sync(raw, group, g, "nobody").error_code == E.UNKNOWN_MEMBER_ID
    assert heartbeat(raw, group, g, "nobody") == E.UNKNOWN_MEMBER_ID
    assert commit(raw, group, {(topic, 0): 5}, g, "nobody") == {(topic, 0): E.UNKNOWN_MEMBER_ID}
    # stale generation
    assert sync(raw, group, g - 1, j.member_id).error_code == E.ILLEGAL_GENERATION
    assert heartbeat(raw, group, g + 1, j.member_id) == E.ILLEGAL_GENERATION
    assert commit(raw, group, {(topic, 0): 6}, g + 1, j.member_id) == {(topic, 0): E.ILLEGAL_GENERATION}
    # wrong protocol type / no common protocol
    assert join(raw, group, protocol_type="connect").error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert join(raw, group, protocols=[JoinGroupRequestProtocol(name="other", metadata=b"")]).error_code == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert join(raw, "fresh-group", protocol_type="", version=3).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # commit to a partition that does not exist, next to one that does
    assert commit(raw, group, {(topic, 0): 7, (topic, 3): 8, ("no-such-topic", 0): 9}, g, j.member_id) == {
        (topic, 0): 0, (topic, 3): E.UNKNOWN_TOPIC_OR_PARTITION, ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    # nothing of the refused commits was stored
    assert fetch(raw, group, [(topic, 0), (topic, 3), ("no-such-topic", 0)]) == (0, {
        (topic, 0): (7, 0), (topic, 3): (-1, 0), ("no-such-topic", 0): (-1, 0)})
    assert fetch(raw, group, None) == (0, {(topic, 0): (7, 0)})
    # none of it disturbed the member
    assert heartbeat(raw, group, g, j.member_id) == 0


def test_session_timeout_out_of_bounds_and_empty_group_id(raw: Raw) -> None:
    assert join(raw, "g", session=10).error_code == E.INVALID_SESSION_TIMEOUT
    assert join(raw, "g", session=10**9).error_code == E.INVALID_SESSION_TIMEOUT
    assert join(raw, "").error_code == E.INVALID_GROUP_ID


def test_delete_list_describe(raw_broker: BrokerProcess, raw: Raw) -> None:
    topic = unique_topic("del")
    create_topic(raw_broker.bootstrap, topic, 1)
    j = join_alone(raw, "live")
    sync(raw, "live", j.generation_id, j.member_id, {j.member_id: b"a"})
    assert commit(raw, "solo", {(topic, 0): 3}) == {(topic, 0): 0}
    listed = raw.request(ListGroupsRequest(states_filter=[]), 4)
    assert isinstance(listed, ListGroupsResponse)
    assert {(g.group_id, g.group_state) for g in listed.groups} == {("live", "Stable"), ("solo", "Empty")}
    d = raw.request(DescribeGroupsRequest(groups=["live", "ghost"]), 5)
    assert isinstance(d, DescribeGroupsResponse)
    live, ghost = d.groups
    assert (live.group_state, live.protocol_type, live.protocol_data) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.member_assignment, m.client_host) for m in live.members] == [
        (j.member_id, b"a", "/127.0.0.1")]
    assert (ghost.error_code, ghost.group_state) == (0, "Dead")
    out = raw.request(DeleteGroupsRequest(groups_names=["live", "solo", "ghost"]), 2)
    assert isinstance(out, DeleteGroupsResponse)
    assert {r.group_id: r.error_code for r in out.results} == {
        "live": E.NON_EMPTY_GROUP, "solo": 0, "ghost": E.GROUP_ID_NOT_FOUND}
    assert fetch(raw, "solo", [(topic, 0)]) == (0, {(topic, 0): (-1, 0)})
    left = raw.request(LeaveGroupRequest(group_id="live", members=[MemberIdentity(member_id=j.member_id)]), 3)
    assert isinstance(left, LeaveGroupResponse) and left.members[0].error_code == 0
    out = raw.request(DeleteGroupsRequest(groups_names=["live"]), 0)
    assert isinstance(out, DeleteGroupsResponse) and out.results[0].error_code == 0


def test_old_and_flexible_versions(raw_broker: BrokerProcess, raw: Raw) -> None:
    topic = unique_topic("versions")
    create_topic(raw_broker.bootstrap, topic, 1)
    # v0 join: the member id comes at once (no MEMBER_ID_REQUIRED before v4)
    j0 = join(raw, "old", version=0)
    assert j0.error_code == 0 and j0.member_id and j0.generation_id == 1
    assert sync(raw, "old", 1, j0.member_id, {j0.member_id: b"z"}, version=0).assignment == b"z"
    assert heartbeat(raw, "old", 1, j0.member_id, version=0) == 0
    assert commit(raw, "old", {(topic, 0): 4}, 1, j0.member_id, version=2) == {(topic, 0): 0}
    assert fetch(raw, "old", [(topic, 0)], version=1) == (0, {(topic, 0): (4, 0)})
    left = raw.request(LeaveGroupRequest(group_id="old", member_id=j0.member_id), 0)
    assert isinstance(left, LeaveGroupResponse) and left.error_code == 0
    left = raw.request(LeaveGroupRequest(group_id="old", member_id=j0.member_id), 1)
    assert isinstance(left, LeaveGroupResponse) and left.error_code == E.UNKNOWN_MEMBER_ID
    # the newest, flexible versions
    j9 = join_alone(raw, "new", version=9)
    assert j9.protocol_name == "range" and j9.protocol_type == "consumer"
    s5 = raw.request(SyncGroupRequest(group_id="new", generation_id=j9.generation_id, member_id=j9.member_id,
                                      protocol_type="consumer", protocol_name="range",
                                      assignments=[SyncGroupRequestAssignment(member_id=j9.member_id,
                                                                              assignment=b"n")]), 5)
    assert isinstance(s5, SyncGroupResponse) and (s5.error_code, s5.assignment, s5.protocol_name) == (0, b"n", "range")
    assert heartbeat(raw, "new", j9.generation_id, j9.member_id, version=4) == 0
    assert commit(raw, "new", {(topic, 0): 9}, j9.generation_id, j9.member_id, version=8) == {(topic, 0): 0}
    assert fetch(raw, "new", [(topic, 0)], version=8, require_stable=True) == (0, {(topic, 0): (9, 0)})
    assert fetch(raw, "new", None, version=8) == (0, {(topic, 0): (9, 0)})
    fc = raw.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["new", "old"]), 4)
    assert isinstance(fc, FindCoordinatorResponse)
    assert [(c.key, c.error_code, c.port) for c in fc.coordinators] == [
        ("new", 0, raw_broker.port), ("old", 0, raw_broker.port)]


def test_static_member_restart_over_the_wire(raw: Raw) -> None:
    j = join(raw, "static", instance="inst-1")
    assert j.error_code == 0  # static members skip MEMBER_ID_REQUIRED
    sync(raw, "static", j.generation_id, j.member_id, {j.member_id: b"kept"})
    again = join(raw, "static", instance="inst-1", version=9)
    assert again.error_code == 0 and again.member_id != j.member_id
    assert again.generation_id == j.generation_id and again.skip_assignment
    resp = raw.request(HeartbeatRequest(group_id="static", generation_id=j.generation_id, member_id=j.member_id,
                                        group_instance_id="inst-1"), 3)
    assert isinstance(resp, HeartbeatResponse) and resp.error_code == E.FENCED_INSTANCE_ID
    assert sync(raw, "static", again.generation_id, again.member_id).assignment == b"kept"


# ---- group.max.size --------------------------------------------------------------------------

async def test_group_max_size_turns_away_a_third_consumer(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory(env={**FAST, "KETCH_GROUP_MAX_SIZE": "2"})
    bs = broker.bootstrap
    topic, group = unique_topic("max-size"), f"g-{uuid.uuid4().hex[:8]}"
    async with client.Admin(bs) as admin:
        await admin.create_topic(topic, 2)
    kw = dict(group_id=group, assignors=("range",), heartbeat_interval_ms=200, session_timeout_ms=6000,
              rebalance_timeout_ms=10_000, enable_auto_commit=False)
    async with client.Consumer(bs, **kw) as a, client.Consumer(bs, **kw) as b:  # type: ignore[arg-type]
        a.subscribe([topic])
        b.subscribe([topic])
        split = asyncio.Event()

        async def poll(c: client.Consumer) -> None:
            # each member polls on its own, so one parked in JoinGroup does not hold up the other
            while not split.is_set():
                await c.getmany(timeout_ms=100)
                if len(a.assignment()) == len(b.assignment()) == 1:
                    split.set()

        tasks = [asyncio.ensure_future(poll(c)) for c in (a, b)]
        try:
            await asyncio.wait_for(split.wait(), 30)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        owned = a.assignment() | b.assignment()

        async with client.Consumer(bs, **kw) as third:  # type: ignore[arg-type]
            third.subscribe([topic])
            with pytest.raises(client.GroupMaxSizeReachedError) as info:
                await asyncio.wait_for(third.getmany(timeout_ms=5_000), 30)
            assert info.value.code == E.GROUP_MAX_SIZE_REACHED
            assert third.assignment() == set()

        # the two members were not disturbed: still Stable, the same two, the same partitions
        async with client.Admin(bs) as admin:
            desc = (await admin.describe_groups([group]))[group]
        assert desc.state == "Stable" and len(desc.members) == 2
        assert {tp for m in desc.members for tp in m.assignment} == owned
