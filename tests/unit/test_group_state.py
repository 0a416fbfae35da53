"""The group coordinator's state machine, driven event by event with an explicit clock."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from broker.group import records as rec
from broker.group.model import (
    GroupState,
    JoinRequest,
    JoinResult,
    Now,
    OffsetCommitIn,
    SyncRequest,
    SyncResult,
    Write,
)
from broker.group.state import GroupStateMachine, Settings
from broker.partitioning import java_string_hash, partition_for
from client.assignors import Subscription, encode_subscription
from protocol.clock import ManualClock
from protocol.errors import ErrorCode as E

G = "grp"
SESSION = 10_000
REBALANCE = 20_000
RANGE = [("range", b"sub-1")]


class Harness:
    """One state machine plus a recorder of everything it asked for."""

    def __init__(self, delay: int = 0, partitions: frozenset[tuple[str, int]] = frozenset({("t", 0), ("t", 1)}),
                 retention_ms: int = 60_000, max_size: int = Settings().max_group_size) -> None:
        ids = itertools.count(1)
        self.settings = Settings(num_partitions=4, initial_rebalance_delay_ms=delay, min_session_timeout_ms=1000,
                                 max_session_timeout_ms=60_000, offsets_retention_ms=retention_ms,
                                 offsets_retention_check_interval_ms=1000, max_group_size=max_size)
        self.sm = GroupStateMachine(self.settings, lambda t, p: (t, p) in partitions,
                                    new_member_id=lambda prefix: f"{prefix}-{next(ids)}")
        self.clock = ManualClock()
        self.sm.own_partitions(range(4), self.now)
        self.tokens = itertools.count(1)
        self.replies: dict[int, JoinResult | SyncResult] = {}
        self.writes: list[Write] = []

    @property
    def now(self) -> Now:
        return Now.of(self.clock)

    def pump(self) -> None:
        fx = self.sm.drain()
        self.writes += fx.writes
        for token, result in fx.replies:
            assert token not in self.replies, f"token {token} answered twice"
            self.replies[token] = result

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.sm.tick(self.now)
        self.pump()

    def join(self, member_id: str = "", *, group: str = G, client: str = "c", protocols: list | None = None,
             instance: str | None = None, v4: bool = True, session: int = SESSION,
             ptype: str = "consumer") -> int:
        token = next(self.tokens)
        self.sm.join_group(token, JoinRequest(group, member_id, instance, client, "/127.0.0.1", session,
                                              REBALANCE, ptype, list(protocols or RANGE),
                                              v4 and instance is None), self.now)
        self.pump()
        return token

    def join_result(self, token: int) -> JoinResult:
        r = self.replies.get(token)
        assert isinstance(r, JoinResult), f"join {token} not answered"
        return r

    def new_member(self, client: str = "c", **kw: object) -> int:
        """The v4 two-step: MEMBER_ID_REQUIRED, then the join with the given id (parked token)."""
        first = self.join(client=client, **kw)  # type: ignore[arg-type]
        r = self.join_result(first)
        assert r.error == E.MEMBER_ID_REQUIRED and r.member_id
        return self.join(r.member_id, client=client, **kw)  # type: ignore[arg-type]

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None, *,
             instance: str | None = None, protocol_name: str | None = None) -> int:
        token = next(self.tokens)
        self.sm.sync_group(token, SyncRequest(G, generation, member_id, instance, None, protocol_name,
                                              assignments or {}), self.now)
        self.pump()
        return token

    def sync_result(self, token: int) -> SyncResult:
        r = self.replies.get(token)
        assert isinstance(r, SyncResult), f"sync {token} not answered"
        return r

    def state(self, group: str = G) -> GroupState:
        return self.sm.groups[group].state

    def stable_group(self, n: int, protocols: list | None = None) -> tuple[list[str], int]:
        """n members through join and sync; returns (member ids, generation)."""
        tokens = [self.new_member(client=f"c{i}", protocols=protocols) for i in range(n)]
        self.advance(0)
        # the first member completed alone (no delay); later ones forced a rebalance: rejoin all
        while not all(t in self.replies and self.join_result(t).error == 0 for t in tokens) or \
                len({self.join_result(t).generation_id for t in tokens}) != 1:
            for i, t in enumerate(tokens):
                r = self.replies.get(t)
                if r is not None:
                    assert isinstance(r, JoinResult)
                    tokens[i] = self.join(r.member_id, client=f"c{i}", protocols=protocols)
            self.advance(0)
        results = [self.join_result(t) for t in tokens]
        gen = results[0].generation_id
        leader = results[0].leader
        ids = [r.member_id for r in results]
        syncs = [self.sync(m, gen, {m2: m2.encode() for m2 in ids} if m == leader else None) for m in ids]
        assert all(self.sync_result(s).error == 0 for s in syncs)
        assert self.state() is GroupState.STABLE
        return ids, gen

    def commit(self, offsets: dict[tuple[str, int], int], member: str = "", generation: int = -1,
               metadata: str | None = None, group: str = G) -> dict[tuple[str, int], int]:
        plan = self.sm.commit_offsets(group, member, None, generation,
                                      {tp: OffsetCommitIn(o, metadata=metadata) for tp, o in offsets.items()},
                                      self.now)
        self.writes += plan.writes
        if plan.writes:
            self.sm.offsets_written(plan, len(self.writes))
        self.pump()
        return plan.errors

    def fetched(self, tps: list[tuple[str, int]] | None = None, stable: bool = False,
                group: str = G) -> dict[tuple[str, int], tuple[int, int]]:
        err, offs = self.sm.fetch_offsets(group, tps, stable)
        assert err == 0
        return {(o.topic, o.partition): (o.offset, o.error) for o in offs}


# ---- partition choice -----------------------------------------------------------------------

def test_java_string_hash_matches_java() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert java_string_hash("\u00e9") == 233
    assert java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00  # two UTF-16 code units


def test_partition_for_follows_kafka() -> None:
    assert partition_for("test", 50) == 3556498 % 50
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert partition_for("Aa", 7) == partition_for("BB", 7)  # equal Java hashes
    assert all(0 <= partition_for(f"g{i}", 50) < 50 for i in range(200))


# ---- join and sync ---------------------------------------------------------------------------

def test_member_id_required_then_join_sync_stable() -> None:
    h = Harness()
    t = h.new_member()
    assert t not in h.replies  # parked until the join phase ends
    h.advance(0)
    r = h.join_result(t)
    assert r.error == 0 and r.generation_id == 1 and r.leader == r.member_id
    assert r.protocol_name == "range" and r.protocol_type == "consumer"
    assert [m.member_id for m in r.members] == [r.member_id] and r.members[0].metadata == b"sub-1"
    assert h.state() is GroupState.COMPLETING_REBALANCE
    s = h.sync(r.member_id, 1, {r.member_id: b"assign"})
    assert h.sync_result(s) == SyncResult(0, "consumer", "range", b"assign")
    assert h.state() is GroupState.STABLE
    group_writes = [w for w in h.writes if isinstance(rec.decode_key(w.key), rec.GroupKey)]
    value = rec.decode_group_value(group_writes[-1].value or b"")
    assert value.generation == 1 and value.members[0].assignment == b"assign"


def test_pre_v4_join_gets_a_member_id_at_once() -> None:
    h = Harness()
    t = h.join(v4=False)
    h.advance(0)
    r = h.join_result(t)
    assert r.error == 0 and r.member_id.startswith("c-")


def test_initial_delay_gathers_members_into_one_generation() -> None:
    h = Harness(delay=3000)
    a = h.new_member(client="a")
    h.advance(100)
    b = h.new_member(client="b")
    h.advance(2900)  # first delay over, but a member arrived meanwhile: extended
    assert a not in h.replies and b not in h.replies
    h.advance(3000)
    ra, rb = h.join_result(a), h.join_result(b)
    assert ra.generation_id == rb.generation_id == 1
    assert ra.leader == rb.leader == ra.member_id
    assert len(ra.members) == 2 and rb.members == ()


def test_follower_sync_waits_for_the_leader() -> None:
    h = Harness(delay=1000)
    a, b = h.new_member(client="a"), h.new_member(client="b")
    h.advance(1000)
    h.advance(1000)
    ra, rb = h.join_result(a), h.join_result(b)
    fs = h.sync(rb.member_id, rb.generation_id)
    assert fs not in h.replies
    h.sync(ra.member_id, ra.generation_id, {ra.member_id: b"A", rb.member_id: b"B"})
    assert h.sync_result(fs).assignment == b"B"


def test_sync_errors() -> None:
    h = Harness()
    (m,), gen = h.stable_group(1)
    assert h.sync_result(h.sync(m, gen + 1)).error == E.ILLEGAL_GENERATION
    assert h.sync_result(h.sync("nobody", gen)).error == E.UNKNOWN_MEMBER_ID
    assert h.sync_result(h.sync(m, gen, protocol_name="roundrobin")).error == E.INCONSISTENT_GROUP_PROTOCOL
    h.join(m)  # the leader rejoins: a new rebalance
    assert h.state() is GroupState.PREPARING_REBALANCE or h.state() is GroupState.COMPLETING_REBALANCE


def test_sync_during_rebalance_is_rebalance_in_progress() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    h.join(a, client="c0")  # leader rejoins; b has not yet
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.sync_result(h.sync(b, gen)).error == E.REBALANCE_IN_PROGRESS
    assert h.sm.heartbeat(G, b, None, gen, h.now) == E.REBALANCE_IN_PROGRESS


def test_join_errors() -> None:
    h = Harness()
    h.stable_group(1)
    assert h.join_result(h.join("ghost")).error == E.UNKNOWN_MEMBER_ID
    assert h.join_result(h.join(ptype="connect")).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join_result(h.join(protocols=[("sticky", b"")])).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join_result(h.join(group="new", ptype="")).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join_result(h.join(group="")).error == E.INVALID_GROUP_ID
    assert h.join_result(h.join(session=500)).error == E.INVALID_SESSION_TIMEOUT
    assert h.join_result(h.join("someone", group="unknown-group")).error == E.UNKNOWN_MEMBER_ID
    assert h.state() is GroupState.STABLE  # none of that disturbed the group


def test_protocol_vote_picks_one_all_members_support() -> None:
    h = Harness(delay=1000)
    a = h.new_member(client="a", protocols=[("range", b"1"), ("roundrobin", b"2")])
    b = h.new_member(client="b", protocols=[("roundrobin", b"3")])
    h.advance(1000)
    h.advance(1000)
    ra = h.join_result(a)
    assert ra.protocol_name == h.join_result(b).protocol_name == "roundrobin"
    assert {m.metadata for m in ra.members} == {b"2", b"3"}


# ---- heartbeats and timeouts -----------------------------------------------------------------

def test_heartbeat_errors() -> None:
    h = Harness()
    (m,), gen = h.stable_group(1)
    assert h.sm.heartbeat(G, m, None, gen, h.now) == 0
    assert h.sm.heartbeat(G, "ghost", None, gen, h.now) == E.UNKNOWN_MEMBER_ID
    assert h.sm.heartbeat(G, m, None, gen - 1, h.now) == E.ILLEGAL_GENERATION
    assert h.sm.heartbeat("no-such-group", m, None, gen, h.now) == E.UNKNOWN_MEMBER_ID


def test_session_timeout_removes_a_silent_member_and_rebalances() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    for _ in range(4):  # a keeps heartbeating, b is silent
        h.advance(SESSION // 3)
        assert h.sm.heartbeat(G, a, None, gen, h.now) in (0, E.REBALANCE_IN_PROGRESS)
    assert b not in h.sm.groups[G].members
    assert h.sm.heartbeat(G, a, None, gen, h.now) == E.REBALANCE_IN_PROGRESS
    t = h.join(a, client="c0")
    r = h.join_result(t)
    assert r.generation_id == gen + 1 and [m.member_id for m in r.members] == [a]


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    t = h.join(a, client="c0")
    for _ in range(REBALANCE // 5000 - 1):  # b heartbeats (it is alive) but never rejoins
        h.advance(5000)
        assert h.sm.heartbeat(G, b, None, gen, h.now) == E.REBALANCE_IN_PROGRESS
        assert t not in h.replies
    h.advance(5000)
    r = h.join_result(t)
    assert r.error == 0 and r.generation_id == gen + 1 and [m.member_id for m in r.members] == [a]
    assert h.sm.heartbeat(G, b, None, gen, h.now) == E.UNKNOWN_MEMBER_ID


def test_pending_member_that_never_rejoins_expires() -> None:
    h = Harness()
    (a,), gen = h.stable_group(1)
    first = h.join(client="late")
    assert h.join_result(first).error == E.MEMBER_ID_REQUIRED
    # a's own rejoin cannot complete while the pending member might still come
    t = h.join(a, client="c0")
    assert t not in h.replies
    h.advance(SESSION)
    assert h.join_result(t).generation_id == gen + 1


def test_leader_that_never_syncs_is_dropped_after_rebalance_timeout() -> None:
    h = Harness(delay=1000)
    a, b = h.new_member(client="a"), h.new_member(client="b")
    h.advance(1000)
    h.advance(1000)
    rb = h.join_result(b)
    s = h.sync(rb.member_id, rb.generation_id)
    h.advance(REBALANCE)
    assert h.sync_result(s).error == E.REBALANCE_IN_PROGRESS
    assert h.join_result(a).member_id not in h.sm.groups[G].members


def test_last_member_leaving_empties_the_group() -> None:
    h = Harness()
    (a,), gen = h.stable_group(1)
    top, errs = h.sm.leave_group(G, [(a, None), ("ghost", None)], h.now)
    h.pump()
    assert (top, errs) == (0, [0, E.UNKNOWN_MEMBER_ID])
    assert h.state() is GroupState.EMPTY and h.sm.groups[G].generation == gen + 1
    last = rec.decode_group_value(h.writes[-1].value or b"")
    assert last.members == () and last.generation == gen + 1


def test_leave_triggers_rebalance_for_the_rest() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    h.sm.leave_group(G, [(b, None)], h.now)
    h.pump()
    assert h.sm.heartbeat(G, a, None, gen, h.now) == E.REBALANCE_IN_PROGRESS
    r = h.join_result(h.join(a, client="c0"))
    assert r.generation_id == gen + 1 and len(r.members) == 1


# ---- static membership -----------------------------------------------------------------------

def test_static_member_restart_keeps_the_generation_and_fences_the_old_id() -> None:
    h = Harness()
    t = h.join(instance="i1")
    h.advance(0)
    r = h.join_result(t)
    h.sync(r.member_id, r.generation_id, {r.member_id: b"mine"}, instance="i1")
    assert h.state() is GroupState.STABLE
    t2 = h.join(instance="i1")  # restarted: no member id, same instance id, same protocols
    r2 = h.join_result(t2)
    assert r2.error == 0 and r2.member_id != r.member_id and r2.generation_id == r.generation_id
    assert r2.skip_assignment and r2.leader == r2.member_id
    assert h.state() is GroupState.STABLE  # no rebalance
    assert h.sm.heartbeat(G, r.member_id, "i1", r.generation_id, h.now) == E.FENCED_INSTANCE_ID
    assert h.sync_result(h.sync(r2.member_id, r2.generation_id, instance="i1")).assignment == b"mine"


def test_static_member_whose_vote_changes_the_protocol_triggers_rebalance() -> None:
    h = Harness()
    t = h.join(instance="i1", protocols=[("range", b"r"), ("roundrobin", b"x")])
    h.advance(0)
    r = h.join_result(t)
    h.sync(r.member_id, r.generation_id, {}, instance="i1")
    t2 = h.join(instance="i1", protocols=[("roundrobin", b"x"), ("range", b"r")])
    h.advance(REBALANCE)
    r2 = h.join_result(t2)
    assert r2.generation_id == r.generation_id + 1 and r2.protocol_name == "roundrobin"


def test_static_member_survives_a_rebalance_it_misses() -> None:
    h = Harness(delay=1000)
    a = h.new_member(client="a")
    s = h.join(instance="s1", client="s")
    h.advance(1000)
    h.advance(1000)
    ra, rs = h.join_result(a), h.join_result(s)
    h.sync(ra.member_id, ra.generation_id, {})
    h.sync(rs.member_id, rs.generation_id, {}, instance="s1")
    ta = h.join(ra.member_id, client="a")  # the leader forces a rebalance; the static member
    for _ in range(REBALANCE // 5000):  # stays alive (heartbeats) but does not rejoin
        h.advance(5000)
        h.sm.heartbeat(G, rs.member_id, "s1", rs.generation_id, h.now)
    r = h.join_result(ta)
    assert r.generation_id == ra.generation_id + 1
    # a dynamic member would have been dropped; the static one keeps its place
    assert {m.member_id for m in r.members} == {ra.member_id, rs.member_id}


# ---- cooperative rebalancing: the broker only sees metadata changes ---------------------------

def test_follower_rejoining_unchanged_in_stable_gets_current_generation() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    r = h.join_result(h.join(b, client="c1"))
    assert r.error == 0 and r.generation_id == gen and r.members == ()
    assert h.state() is GroupState.STABLE


def test_follower_rejoining_with_new_metadata_in_stable_rebalances() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    owned_changed = [("range", b"sub-1+owned")]
    tb = h.join(b, client="c1", protocols=owned_changed)
    assert tb not in h.replies and h.state() is GroupState.PREPARING_REBALANCE
    assert h.sm.heartbeat(G, a, None, gen, h.now) == E.REBALANCE_IN_PROGRESS
    ta = h.join(a, client="c0")
    ra, rb = h.join_result(ta), h.join_result(tb)
    assert ra.generation_id == rb.generation_id == gen + 1
    assert {m.member_id: m.metadata for m in ra.members}[b] == b"sub-1+owned"


def test_retried_join_supersedes_the_parked_one() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    t1 = h.join(a, client="c0")
    t2 = h.join(a, client="c0")
    assert h.join_result(t1).error == E.REBALANCE_IN_PROGRESS
    h.join(b, client="c1")
    assert h.join_result(t2).generation_id == gen + 1


# ---- offsets ---------------------------------------------------------------------------------

def test_commit_and_fetch() -> None:
    h = Harness()
    (m,), gen = h.stable_group(1)
    assert h.commit({("t", 0): 5, ("t", 1): 7}, m, gen, metadata="x") == {("t", 0): 0, ("t", 1): 0}
    assert h.fetched([("t", 0), ("t", 1), ("t", 9)]) == {("t", 0): (5, 0), ("t", 1): (7, 0), ("t", 9): (-1, 0)}
    assert h.fetched(None) == {("t", 0): (5, 0), ("t", 1): (7, 0)}
    err, offs = h.sm.fetch_offsets(G, [("t", 0)], False)
    assert offs[0].metadata == "x"


def test_commit_to_unknown_partition_stores_nothing_for_it() -> None:
    h = Harness()
    before = len(h.writes)
    errs = h.commit({("t", 0): 1, ("nope", 0): 3, ("t", 5): 4})
    assert errs == {("t", 0): 0, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION, ("t", 5): E.UNKNOWN_TOPIC_OR_PARTITION}
    keys = [rec.decode_key(w.key) for w in h.writes[before:]]
    assert keys == [rec.OffsetKey(G, "t", 0)]
    assert h.fetched([("nope", 0), ("t", 5)]) == {("nope", 0): (-1, 0), ("t", 5): (-1, 0)}


def test_commit_with_too_much_metadata() -> None:
    h = Harness()
    errs = h.commit({("t", 0): 1}, metadata="x" * (h.settings.offset_metadata_max_bytes + 1))
    assert errs == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}
    assert not h.writes and G not in h.sm.groups


@pytest.mark.parametrize("case", ["unknown_member", "stale_generation", "completing", "no_group_with_generation",
                                  "simple_commit_on_live_group"])
def test_commit_rejections_store_nothing(case: str) -> None:
    h = Harness()
    if case == "no_group_with_generation":
        assert h.commit({("t", 0): 1}, "m", 3) == {("t", 0): E.ILLEGAL_GENERATION}
        assert not h.writes
        return
    (m,), gen = h.stable_group(1)
    h.commit({("t", 0): 1}, m, gen)
    n = len(h.writes)
    if case == "unknown_member":
        expect, errs = E.UNKNOWN_MEMBER_ID, h.commit({("t", 0): 9}, "ghost", gen)
    elif case == "stale_generation":
        expect, errs = E.ILLEGAL_GENERATION, h.commit({("t", 0): 9}, m, gen - 1)
    elif case == "simple_commit_on_live_group":
        expect, errs = E.UNKNOWN_MEMBER_ID, h.commit({("t", 0): 9})
    else:
        h.join(m, client="c0")  # leader rejoins -> completes at once (only member)
        assert h.state() is GroupState.COMPLETING_REBALANCE
        expect, errs = E.REBALANCE_IN_PROGRESS, h.commit({("t", 0): 9}, m, gen + 1)
    assert errs == {("t", 0): expect}
    assert len(h.writes) == n
    assert h.fetched([("t", 0)]) == {("t", 0): (1, 0)}


def test_commit_while_preparing_rebalance_with_current_generation_is_accepted() -> None:
    # eager consumers commit in onPartitionsRevoked, after the rebalance began
    h = Harness()
    (a, b), gen = h.stable_group(2)
    h.join(a, client="c0")
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.commit({("t", 1): 4}, b, gen) == {("t", 1): 0}


def test_coordinator_errors() -> None:
    h = Harness()
    h.sm.owned.discard(h.sm.partition_for("elsewhere"))
    assert h.join_result(h.join(group="elsewhere")).error == E.NOT_COORDINATOR
    assert h.commit({("t", 0): 1}, group="elsewhere") == {("t", 0): E.NOT_COORDINATOR}
    h.sm.begin_loading(h.sm.partition_for("elsewhere"), 0)
    assert h.sm.heartbeat("elsewhere", "m", None, 1, h.now) == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.sm.fetch_offsets("elsewhere", [("t", 0)], False)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    h.sm.active = False
    assert h.sm.describe_group(G)[0] == E.COORDINATOR_NOT_AVAILABLE


# ---- transactional offsets -------------------------------------------------------------------

def _txn(h: Harness, pid: int, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    plan = h.sm.prepare_txn_offsets(G, pid, 0, {tp: OffsetCommitIn(o) for tp, o in offsets.items()}, h.now)
    h.writes += plan.writes
    if plan.writes:
        h.sm.offsets_written(plan, len(h.writes))
    return plan.errors


def test_txn_offsets_invisible_until_commit_marker() -> None:
    h = Harness()
    h.commit({("t", 0): 1})
    assert _txn(h, 42, {("t", 0): 10, ("t", 1): 20}) == {("t", 0): 0, ("t", 1): 0}
    assert h.fetched([("t", 0), ("t", 1)]) == {("t", 0): (1, 0), ("t", 1): (-1, 0)}
    assert h.fetched([("t", 0), ("t", 1)], stable=True) == {
        ("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT), ("t", 1): (-1, E.UNSTABLE_OFFSET_COMMIT)}
    h.sm.complete_txn(42, commit=True, partition=h.sm.partition_for(G))
    assert h.fetched([("t", 0), ("t", 1)], stable=True) == {("t", 0): (10, 0), ("t", 1): (20, 0)}


def test_txn_abort_drops_pending_offsets() -> None:
    h = Harness()
    h.commit({("t", 0): 1})
    _txn(h, 7, {("t", 0): 10})
    h.sm.complete_txn(7, commit=False, partition=h.sm.partition_for(G))
    assert h.fetched([("t", 0)], stable=True) == {("t", 0): (1, 0)}


def test_a_lapsed_lease_sends_clients_elsewhere_until_renewed() -> None:
    lease = [True]
    sm = GroupStateMachine(Settings(num_partitions=1), lambda t, p: True, lease_held=lambda: lease[0])
    sm.own_partitions(range(1), Now(0, 0))
    assert sm.fetch_offsets(G, [("t", 0)], False)[0] == 0
    lease[0] = False
    assert sm.fetch_offsets(G, [("t", 0)], False)[0] == E.NOT_COORDINATOR
    assert sm.coordinator_error(G) == E.NOT_COORDINATOR
    lease[0] = True
    assert sm.fetch_offsets(G, [("t", 0)], False)[0] == 0


def test_a_partition_led_here_whose_log_is_still_opening_answers_load_in_progress() -> None:
    """The metadata names this broker the group's partition leader before its log has opened (logs
    open off the loop, broker/log_io.py): FindCoordinator already names it, so a client's commit
    must be told to retry (COORDINATOR_LOAD_IN_PROGRESS), as Kafka's loading coordinator answers,
    not NOT_COORDINATOR -- librdkafka's synchronous commit fails on that one (a fresh-clone run)."""
    opening = [True]
    sm = GroupStateMachine(Settings(num_partitions=1), lambda t, p: True, opening=lambda i: opening[0])
    assert sm.coordinator_error(G) == E.COORDINATOR_LOAD_IN_PROGRESS
    opening[0] = False
    assert sm.coordinator_error(G) == E.NOT_COORDINATOR
    sm.own_partitions(range(1), Now(0, 0))
    assert sm.coordinator_error(G) == 0


def test_txn_offsets_that_did_not_replicate_are_no_longer_pending() -> None:
    h = Harness()
    h.commit({("t", 0): 1})
    plan = h.sm.prepare_txn_offsets(G, 5, 0, {("t", 0): OffsetCommitIn(10), ("t", 1): OffsetCommitIn(20)}, h.now)
    h.writes += plan.writes
    h.sm.offsets_written(plan, len(h.writes))  # pending from the append on
    _txn(h, 6, {("t", 1): 30})  # another producer's, untouched
    h.sm.txn_offsets_failed(plan)
    assert h.fetched([("t", 0)], stable=True) == {("t", 0): (1, 0)}
    assert h.fetched([("t", 1)], stable=True) == {("t", 1): (-1, E.UNSTABLE_OFFSET_COMMIT)}
    h.sm.complete_txn(5, commit=True, partition=h.sm.partition_for(G))  # nothing of 5's is left
    h.sm.complete_txn(6, commit=True, partition=h.sm.partition_for(G))
    assert h.fetched([("t", 0), ("t", 1)], stable=True) == {("t", 0): (1, 0), ("t", 1): (30, 0)}
    h.sm.txn_offsets_failed(plan)  # after its marker took them: nothing to undo


def test_later_plain_commit_beats_an_earlier_txn_commit() -> None:
    h = Harness()
    _txn(h, 9, {("t", 0): 10})
    h.commit({("t", 0): 11})
    h.sm.complete_txn(9, commit=True, partition=h.sm.partition_for(G))
    assert h.fetched([("t", 0)]) == {("t", 0): (11, 0)}


def test_a_marker_completes_only_the_groups_of_its_own_partition() -> None:
    """One transaction committing offsets for two groups that live on different
    `__consumer_offsets` partitions: each partition's marker publishes its own group's offsets,
    never the other's, whose marker may not have landed (issue 11, item 4)."""
    h = Harness()
    g1 = G
    g2 = next(f"other-{i}" for i in range(100) if h.sm.partition_for(f"other-{i}") != h.sm.partition_for(g1))
    for gid, offset in ((g1, 10), (g2, 20)):
        plan = h.sm.prepare_txn_offsets(gid, 42, 0, {("t", 0): OffsetCommitIn(offset)}, h.now)
        h.writes += plan.writes
        h.sm.offsets_written(plan, len(h.writes))

    def stable(gid: str) -> tuple[int, int]:
        f = h.sm.fetch_offsets(gid, [("t", 0)], True)[1][0]
        return f.offset, f.error

    h.sm.complete_txn(42, commit=True, partition=h.sm.partition_for(g1))
    assert stable(g1) == (10, 0)
    assert stable(g2) == (-1, E.UNSTABLE_OFFSET_COMMIT)  # its marker has not landed yet
    h.sm.complete_txn(42, commit=True, partition=h.sm.partition_for(g2))
    assert stable(g2) == (20, 0)


def test_txn_commit_to_unknown_partition_is_refused() -> None:
    h = Harness()
    assert _txn(h, 1, {("zz", 0): 1}) == {("zz", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    h.sm.complete_txn(1, commit=True, partition=h.sm.partition_for(G))
    assert h.fetched([("zz", 0)]) == {("zz", 0): (-1, 0)}


# ---- delete, list, describe ------------------------------------------------------------------

def test_delete_groups() -> None:
    h = Harness()
    (m,), gen = h.stable_group(1)
    h.commit({("t", 0): 3}, m, gen)
    h.commit({("t", 1): 3}, group="solo")
    out = h.sm.delete_groups([G, "solo", "ghost"], h.now)
    assert out == {G: E.NON_EMPTY_GROUP, "solo": 0, "ghost": E.GROUP_ID_NOT_FOUND}
    tomb = [(rec.decode_key(w.key), w.value) for w in h.sm.drain().writes]
    assert tomb == [(rec.OffsetKey("solo", "t", 1), None), (rec.GroupKey("solo"), None)]
    assert "solo" not in h.sm.groups and h.fetched([("t", 1)], group="solo") == {("t", 1): (-1, 0)}
    h.sm.leave_group(G, [(m, None)], h.now)
    assert h.sm.delete_groups([G], h.now) == {G: 0}


def test_list_and_describe() -> None:
    h = Harness()
    (m,), gen = h.stable_group(1)
    h.commit({("t", 0): 1}, group="solo")
    err, groups = h.sm.list_groups()
    assert err == 0 and sorted(groups) == [(G, "consumer", "Stable", "classic"), ("solo", "", "Empty", "classic")]
    assert h.sm.list_groups(["stable"])[1] == [(G, "consumer", "Stable", "classic")]
    assert h.sm.list_groups(None, ["consumer"])[1] == []
    err, d = h.sm.describe_group(G)
    assert (d.state, d.protocol_type, d.protocol_name) == ("Stable", "consumer", "range")
    assert d.members[0].member_id == m and d.members[0].assignment == m.encode()
    assert h.sm.describe_group("ghost")[1].state == "Dead"


# ---- retention -------------------------------------------------------------------------------

def test_offsets_of_an_empty_group_expire_after_retention() -> None:
    h = Harness(retention_ms=60_000)
    (m,), gen = h.stable_group(1)
    h.commit({("t", 0): 3}, m, gen)
    h.advance(50_000)
    h.sm.heartbeat(G, m, None, gen, h.now)
    h.sm.leave_group(G, [(m, None)], h.now)  # Empty from now on
    h.pump()
    h.advance(59_000)
    assert h.fetched([("t", 0)]) == {("t", 0): (3, 0)}
    h.advance(2_000)
    assert G not in h.sm.groups
    assert (rec.OffsetKey(G, "t", 0), None) in [(rec.decode_key(w.key), w.value) for w in h.writes]


def test_stable_group_offsets_do_not_expire() -> None:
    h = Harness(retention_ms=5_000)
    (m,), gen = h.stable_group(1)
    h.commit({("t", 0): 3}, m, gen)
    for _ in range(5):
        h.advance(3_000)
        assert h.sm.heartbeat(G, m, None, gen, h.now) == 0
    assert h.fetched([("t", 0)]) == {("t", 0): (3, 0)}


def test_simple_consumer_offsets_expire_by_commit_time() -> None:
    h = Harness(retention_ms=10_000)
    h.commit({("t", 0): 1})
    h.advance(6_000)
    h.commit({("t", 1): 2})
    h.advance(5_000)
    assert h.fetched(None) == {("t", 1): (2, 0)}
    h.advance(6_000)
    assert "grp" not in h.sm.groups


def test_the_retention_check_runs_on_the_monotonic_clock_and_judges_by_the_wall_clock() -> None:
    """Offsets are kept for a span of wall time (their commit timestamps are wall time, in the log):
    a wall clock set an hour ahead makes them old, but they go at the next check, which comes on
    its own monotonic period (1 s here), not at once."""
    h = Harness(retention_ms=10_000)
    h.commit({("t", 0): 1})
    h.advance(1_000)  # a check, nothing due yet
    h.clock.set(h.clock.now_ms() + 3_600_000)
    h.advance(999)
    assert h.fetched(None) == {("t", 0): (1, 0)}
    h.advance(1)
    assert "grp" not in h.sm.groups


# ---- reload from the log ---------------------------------------------------------------------

def _reload(h: Harness, txn: dict[int, tuple[int, bool | None]] | None = None,
            settings: Settings | None = None) -> GroupStateMachine:
    """A fresh machine fed every record h wrote, as the loader would (log positions in order)."""
    sm = GroupStateMachine(settings or h.settings, lambda t, p: True)
    for p in range(4):
        sm.begin_loading(p, 0)
    for pos, w in enumerate(h.writes, start=1):
        sm.load_record(w.partition, w.key, w.value, pos)
    for p in range(4):
        sm.finish_loading(p, h.now)
    return sm


def test_reload_restores_groups_offsets_and_tombstones() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    h.commit({("t", 0): 5, ("t", 1): 6}, a, gen)
    h.commit({("t", 0): 8}, b, gen)
    h.commit({("t", 1): 1}, group="gone")
    h.sm.delete_groups(["gone"], h.now)
    h.pump()
    sm = _reload(h)
    g = sm.groups[G]
    assert g.state is GroupState.STABLE and g.generation == gen and set(g.members) == {a, b}
    assert g.protocol_name == "range" and g.members[a].assignment == a.encode()
    assert {tp: e.offset for tp, e in g.offsets.items()} == {("t", 0): 8, ("t", 1): 6}
    assert "gone" not in sm.groups
    assert sm.heartbeat(G, a, None, gen, h.now) == 0


def test_reload_applies_transaction_markers() -> None:
    sm = GroupStateMachine(Settings(num_partitions=1), lambda t, p: True)
    sm.begin_loading(0, 0)
    key = rec.encode_key(rec.OffsetKey(G, "t", 0))
    sm.load_record(0, key, rec.encode_offset_value(rec.OffsetValue(1)), 1)
    sm.load_record(0, key, rec.encode_offset_value(rec.OffsetValue(50)), 2, producer_id=5)
    sm.load_record(0, key, rec.encode_offset_value(rec.OffsetValue(60)), 3, producer_id=6)
    sm.load_marker(0, 5, commit=True)
    sm.load_record(0, key, rec.encode_offset_value(rec.OffsetValue(70)), 5, producer_id=7)
    sm.load_marker(0, 7, commit=False)
    sm.finish_loading(0, Now(0, 0))
    assert sm.fetch_offsets(G, [("t", 0)], False)[1][0].offset == 50
    assert sm.fetch_offsets(G, [("t", 0)], True)[1][0].error == E.UNSTABLE_OFFSET_COMMIT  # pid 6 still open
    sm.complete_txn(6, commit=True, partition=0)
    assert sm.fetch_offsets(G, [("t", 0)], True)[1][0].offset == 60


# ---- group.max.size --------------------------------------------------------------------------

def test_max_size_turns_away_a_newcomer_to_a_full_stable_group() -> None:
    h = Harness(max_size=2)
    (a, b), gen = h.stable_group(2)
    refused = JoinResult(E.GROUP_MAX_SIZE_REACHED, member_id="")
    assert h.join_result(h.join(client="c2")) == refused
    # without the MEMBER_ID_REQUIRED step (before v4), and as a new static member: the same
    assert h.join_result(h.join(client="c3", v4=False)) == refused
    assert h.join_result(h.join(client="c4", instance="s9")) == refused
    g = h.sm.groups[G]
    assert set(g.members) == {a, b} and not g.pending_members and not g.static_members
    assert h.state() is GroupState.STABLE and g.generation == gen
    assert h.sm.heartbeat(G, a, None, gen, h.now) == 0  # the members noticed nothing


def test_max_size_turns_away_newcomers_while_preparing_rebalance() -> None:
    # the first join phase of a new group: two members are waiting in it, a third may not
    h = Harness(delay=1000, max_size=2)
    a, b = h.new_member(client="a"), h.new_member(client="b")
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.join_result(h.join(client="c")) == JoinResult(E.GROUP_MAX_SIZE_REACHED, member_id="")
    h.advance(1000)
    h.advance(1000)
    ra = h.join_result(a)
    assert ra.generation_id == h.join_result(b).generation_id == 1 and len(ra.members) == 2


def test_max_size_turns_away_a_pending_member_whose_place_filled_meanwhile() -> None:
    h = Harness(max_size=2)
    (a, b), gen = h.stable_group(2)
    ta = h.join(a, client="c0")  # the leader rejoins: PreparingRebalance with one member back
    first = h.join_result(h.join(client="late"))
    assert first.error == E.MEMBER_ID_REQUIRED  # only one member back: below the limit
    tb = h.join(b, client="c1")  # both back now; the pending member keeps the join phase open
    assert h.state() is GroupState.PREPARING_REBALANCE and ta not in h.replies
    late = h.join_result(h.join(first.member_id, client="late"))
    assert late == JoinResult(E.GROUP_MAX_SIZE_REACHED, member_id="")
    # it gave up its pending place, so the join phase completes without it
    assert not h.sm.groups[G].pending_members
    ra, rb = h.join_result(ta), h.join_result(tb)
    assert ra.generation_id == rb.generation_id == gen + 1
    assert {m.member_id for m in ra.members} == {a, b}


def test_members_of_a_full_group_may_still_rejoin() -> None:
    h = Harness(max_size=2)
    (a, b), gen = h.stable_group(2)
    r = h.join_result(h.join(b, client="c1"))  # Stable, unchanged metadata: the current generation
    assert r.error == 0 and r.generation_id == gen
    ta = h.join(a, client="c0")  # the leader forces a rebalance
    tb = h.join(b, client="c1")
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert h.join_result(h.join(client="c2")).error == E.GROUP_MAX_SIZE_REACHED
    again = h.join_result(h.join(b, client="c1"))  # b lost its answer: it gets the same one again
    assert again.error == 0 and again.generation_id == h.join_result(tb).generation_id == gen + 1
    ra = h.join_result(ta)
    assert h.sync_result(h.sync(a, ra.generation_id, {a: b"A", b: b"B"})).error == 0
    assert h.state() is GroupState.STABLE and set(h.sm.groups[G].members) == {a, b}


def test_static_member_restarting_in_a_full_group_takes_its_own_place() -> None:
    h = Harness(max_size=1)
    t = h.join(instance="i1")
    h.advance(0)
    r = h.join_result(t)
    h.sync(r.member_id, r.generation_id, {r.member_id: b"mine"}, instance="i1")
    assert h.state() is GroupState.STABLE
    r2 = h.join_result(h.join(instance="i1"))  # restarted without its member id
    assert r2.error == 0 and r2.generation_id == r.generation_id and r2.member_id != r.member_id
    assert h.join_result(h.join(client="other", instance="i2")).error == E.GROUP_MAX_SIZE_REACHED
    assert list(h.sm.groups[G].members) == [r2.member_id]


def test_lowered_max_size_at_load_rebalances_the_group_down_to_the_limit() -> None:
    h = Harness()
    (a, b, c), gen = h.stable_group(3)
    at_limit = _reload(h, settings=dataclasses.replace(h.settings, max_group_size=3))
    assert at_limit.groups[G].state is GroupState.STABLE  # not over the limit: left alone
    h.sm = _reload(h, settings=dataclasses.replace(h.settings, max_group_size=2))
    h.pump()
    g = h.sm.groups[G]
    assert g.state is GroupState.PREPARING_REBALANCE and set(g.members) == {a, b, c}
    assert h.sm.heartbeat(G, c, None, gen, h.now) == E.REBALANCE_IN_PROGRESS
    ta = h.join(a, client="c0")
    tb = h.join(b, client="c1")
    tb2 = h.join(b, client="c1")  # a retry of a member already back is accepted at the limit
    assert h.join_result(tb).error == E.REBALANCE_IN_PROGRESS
    assert h.join_result(h.join(c, client="c2")) == JoinResult(E.GROUP_MAX_SIZE_REACHED, member_id="")
    # the last to come back was removed, and with it gone everyone left has rejoined
    ra, rb = h.join_result(ta), h.join_result(tb2)
    assert ra.error == rb.error == 0 and ra.generation_id == rb.generation_id == gen + 1
    assert {m.member_id for m in ra.members} == {a, b} and set(g.members) == {a, b}
    assert h.sm.heartbeat(G, c, None, gen, h.now) == E.UNKNOWN_MEMBER_ID


# ---- OffsetDelete ----------------------------------------------------------------------------

TU = frozenset({("t", 0), ("t", 1), ("u", 0)})


def _subscribing(*topics: str) -> list[tuple[str, bytes]]:
    """Real consumer-protocol metadata (the bundled client's encoder, v3) for the range assignor."""
    return [("range", encode_subscription(Subscription(topics)))]


def _deleted(h: Harness, tps: list[tuple[str, int]], group: str = G) -> tuple[int, dict[tuple[str, int], int]]:
    out = h.sm.delete_offsets(group, tps)
    h.pump()
    return out


def _tombstones(h: Harness, since: int) -> list[rec.OffsetKey | rec.GroupKey]:
    return [rec.decode_key(w.key) for w in h.writes[since:] if w.value is None]


def test_offset_delete_of_an_empty_group_writes_tombstones_that_survive_reload() -> None:
    h = Harness(partitions=TU)
    h.commit({("t", 0): 5, ("t", 1): 6, ("u", 0): 7}, group="solo")
    before = len(h.writes)
    assert _deleted(h, [("t", 0), ("u", 0), ("t", 9), ("nope", 0)], "solo") == (0, {
        ("t", 0): 0, ("u", 0): 0, ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION})
    assert _tombstones(h, before) == [rec.OffsetKey("solo", "t", 0), rec.OffsetKey("solo", "u", 0)]
    assert h.fetched([("t", 0), ("t", 1), ("u", 0)], group="solo") == {
        ("t", 0): (-1, 0), ("t", 1): (6, 0), ("u", 0): (-1, 0)}
    # deleting what is already gone succeeds and writes nothing
    before = len(h.writes)
    assert _deleted(h, [("t", 0)], "solo") == (0, {("t", 0): 0})
    assert h.writes[before:] == []
    sm = _reload(h)
    assert {tp: e.offset for tp, e in sm.groups["solo"].offsets.items()} == {("t", 1): 6}


def test_offset_delete_keeps_the_offsets_of_topics_a_consumer_group_subscribes_to() -> None:
    h = Harness(partitions=TU)
    (m,), gen = h.stable_group(1, protocols=_subscribing("t"))
    h.commit({("t", 0): 1, ("t", 1): 2, ("u", 0): 3}, m, gen)
    before = len(h.writes)
    assert _deleted(h, [("t", 0), ("t", 1), ("u", 0)]) == (0, {
        ("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("t", 1): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0})
    assert _tombstones(h, before) == [rec.OffsetKey(G, "u", 0)]
    assert h.fetched([("t", 0), ("t", 1), ("u", 0)]) == {("t", 0): (1, 0), ("t", 1): (2, 0), ("u", 0): (-1, 0)}
    assert h.state() is GroupState.STABLE  # the members are not disturbed
    assert h.sm.heartbeat(G, m, None, gen, h.now) == 0
    # once the last member has left, the group is Empty and nothing is subscribed
    h.sm.leave_group(G, [(m, None)], h.now)
    h.pump()
    assert h.state() is GroupState.EMPTY
    assert _deleted(h, [("t", 0)]) == (0, {("t", 0): 0})


def test_offset_delete_uses_the_subscriptions_of_the_current_generation() -> None:
    """As Kafka: the topics are taken when a generation starts, so a member that rejoins with a new
    subscription changes the answer only once that rebalance has completed."""
    h = Harness(partitions=TU)
    (m,), gen = h.stable_group(1, protocols=_subscribing("t"))
    h.commit({("t", 0): 1, ("u", 0): 2}, m, gen)
    t = h.join(m, client="c0", protocols=_subscribing("u"))
    h.advance(0)
    assert h.join_result(t).generation_id == gen + 1 and h.state() is GroupState.COMPLETING_REBALANCE
    assert _deleted(h, [("t", 0), ("u", 0)]) == (0, {("t", 0): 0, ("u", 0): E.GROUP_SUBSCRIBED_TO_TOPIC})


def test_offset_delete_with_unreadable_subscriptions_keeps_everything() -> None:
    h = Harness()
    (m,), gen = h.stable_group(1)  # RANGE's metadata is not a ConsumerProtocolSubscription
    h.commit({("t", 0): 1}, m, gen)
    assert h.sm.groups[G].subscribed_topics is None
    assert _deleted(h, [("t", 0)]) == (0, {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC})
    assert h.fetched([("t", 0)]) == {("t", 0): (1, 0)}


def test_offset_delete_refuses_a_non_consumer_group_with_members() -> None:
    h = Harness()
    h.new_member(ptype="connect")
    h.advance(0)
    assert h.state() is GroupState.COMPLETING_REBALANCE
    before = len(h.writes)
    assert _deleted(h, [("t", 0)]) == (E.NON_EMPTY_GROUP, {})
    assert h.writes[before:] == []


def test_offset_delete_group_errors() -> None:
    h = Harness()
    assert h.sm.delete_offsets("", [("t", 0)]) == (E.INVALID_GROUP_ID, {})
    assert h.sm.delete_offsets("ghost", [("t", 0)]) == (E.GROUP_ID_NOT_FOUND, {})
    h.commit({("t", 0): 1}, group="gone")
    h.sm.delete_groups(["gone"], h.now)
    assert h.sm.delete_offsets("gone", [("t", 0)]) == (E.GROUP_ID_NOT_FOUND, {})
    h.sm.owned.discard(h.sm.partition_for("elsewhere"))
    assert h.sm.delete_offsets("elsewhere", [("t", 0)]) == (E.NOT_COORDINATOR, {})
    h.sm.begin_loading(h.sm.partition_for("elsewhere"), 0)
    assert h.sm.delete_offsets("elsewhere", [("t", 0)]) == (E.COORDINATOR_LOAD_IN_PROGRESS, {})
    h.sm.active = False
    assert h.sm.delete_offsets(G, [("t", 0)]) == (E.COORDINATOR_NOT_AVAILABLE, {})


def test_offset_delete_cancels_a_pending_transactional_offset_in_memory_and_on_reload() -> None:
    h = Harness()
    h.commit({("t", 1): 4})
    _txn(h, 42, {("t", 0): 10, ("t", 1): 11})
    before = len(h.writes)
    assert _deleted(h, [("t", 0)]) == (0, {("t", 0): 0})
    assert _tombstones(h, before) == [rec.OffsetKey(G, "t", 0)]
    assert h.fetched([("t", 0)], stable=True) == {("t", 0): (-1, 0)}  # nothing pending any more
    h.sm.complete_txn(42, commit=True, partition=h.sm.partition_for(G))
    assert h.fetched([("t", 0), ("t", 1)]) == {("t", 0): (-1, 0), ("t", 1): (11, 0)}
    # the loader sees the same log: transactional records, the tombstone, then the commit marker
    sm = GroupStateMachine(h.settings, lambda t, p: True)
    p = h.sm.partition_for(G)
    sm.begin_loading(p, 0)
    for pos, w in enumerate(h.writes, start=1):
        sm.load_record(p, w.key, w.value, pos, producer_id=42 if before - 2 <= pos - 1 < before else -1)
    sm.load_marker(p, 42, commit=True)
    sm.finish_loading(p, h.now)
    assert {tp: e.offset for tp, e in sm.groups[G].offsets.items()} == {("t", 1): 11}
