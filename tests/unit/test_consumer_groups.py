"""KIP-848 consumer groups in the group coordinator's state machine, heartbeat by heartbeat with an
explicit clock: epochs, the target assignment, revoke-before-assign, leaving, sessions, static
members, regex subscriptions, the assignors, the offsets' member checks, the records and their reload."""

from __future__ import annotations

import dataclasses
import itertools
import struct
import uuid

from broker.group import records as rec
from broker.group.assignors import range_, uniform
from broker.group.consumer import ConsumerHeartbeat, HeartbeatResult
from broker.group.consumer_model import MemberState
from broker.group.model import JoinRequest, JoinResult, Now, OffsetCommitIn, SyncRequest, SyncResult, Write
from broker.group.state import GroupStateMachine, Settings
from protocol.clock import ManualClock
from protocol.errors import ErrorCode as E

G = "cg"
SESSION = 30_000
REBALANCE = 20_000
T = uuid.UUID(int=1)
U = uuid.UUID(int=2)


def ps(*parts: int, topic: uuid.UUID = T) -> frozenset[tuple[uuid.UUID, int]]:
    return frozenset((topic, p) for p in parts)


class Harness:
    def __init__(self, topics: dict[str, tuple[uuid.UUID, int]] | None = None, assignors: tuple[str, ...] = (
            "uniform", "range")) -> None:
        ids = itertools.count(1)
        self.topics = dict(topics if topics is not None else {"t": (T, 4)})
        self.settings = Settings(num_partitions=4, initial_rebalance_delay_ms=0, min_session_timeout_ms=1000,
                                 consumer_session_timeout_ms=SESSION, consumer_heartbeat_interval_ms=500,
                                 consumer_assignors=assignors)
        self.sm = GroupStateMachine(self.settings, lambda t, p: t in self.topics and p < self.topics[t][1],
                                    new_member_id=lambda prefix: f"m{next(ids)}", topics=lambda: self.topics)
        self.clock = ManualClock()
        self.sm.own_partitions(range(4), self.now)
        self.writes: list[Write] = []
        self.tokens = itertools.count(1)

    @property
    def now(self) -> Now:
        return Now.of(self.clock)

    def pump(self) -> None:
        self.writes += self.sm.drain().writes
        self.check_exclusive()

    def check_exclusive(self) -> None:
        """No partition is held (assigned or still revoking) by two members at once."""
        for g in self.sm.groups.values():
            if g.consumer is None:
                continue
            seen: dict[tuple[uuid.UUID, int], str] = {}
            for m in g.consumer.members.values():
                for p in m.assigned | m.pending_revocation:
                    assert p not in seen, f"{p} held by {seen[p]} and {m.member_id}"
                    seen[p] = m.member_id

    def hb(self, member_id: str = "", epoch: int = 0, *, owned: frozenset | None = None,
           topics: tuple[str, ...] | None = None, regex: str | None = None, instance: str | None = None,
           assignor: str | None = None, group: str = G) -> HeartbeatResult:
        if epoch == 0:
            owned = frozenset() if owned is None else owned
            topics = topics if topics is not None or regex is not None else ("t",)
        r = self.sm.consumer_heartbeat(ConsumerHeartbeat(
            group, member_id, epoch, instance, None, REBALANCE if epoch == 0 else -1, topics, regex, assignor,
            owned, "client", "/127.0.0.1"), self.now)
        self.pump()
        return r

    def join(self, **kw: object) -> HeartbeatResult:
        r = self.hb(**kw)  # type: ignore[arg-type]
        assert r.error == 0, r
        return r

    def ack(self, r: HeartbeatResult) -> HeartbeatResult:
        """The member's next heartbeat, owning exactly what it was last given (having revoked the rest)."""
        assert r.member_id is not None and r.assignment is not None
        return self.hb(r.member_id, r.member_epoch, owned=r.assignment)

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.sm.tick(self.now)
        self.pump()

    def member(self, member_id: str, group: str = G):  # type: ignore[no-untyped-def]
        cg = self.sm.groups[group].consumer
        assert cg is not None
        return cg.members[member_id]

    def settle(self, results: list[HeartbeatResult], rounds: int = 6) -> list[HeartbeatResult]:
        for _ in range(rounds):
            results = [self.ack(r) for r in results]
        return results


# ---- joining, epochs, reconciliation ----------------------------------------------------------
def test_first_member_joins_and_gets_every_partition() -> None:
    h = Harness()
    r = h.join()
    assert r.member_id == "m1" and r.member_epoch == 1 and r.heartbeat_interval_ms == 500
    assert r.assignment == ps(0, 1, 2, 3)
    cg = h.sm.groups[G].consumer
    assert cg is not None and (cg.group_epoch, cg.assignment_epoch, cg.state()) == (1, 1, "Stable")


def test_a_new_member_gets_partitions_only_after_the_owner_revoked_them() -> None:
    h = Harness()
    a = h.join()
    b = h.join()
    # the target moved two partitions to b, but a still owns them: b is at the new epoch with nothing yet
    assert b.member_epoch == 2 and b.assignment == frozenset()
    assert h.member(b.member_id).state is MemberState.UNRELEASED_PARTITIONS
    # a's next heartbeat, still owning all four, is told to keep two (revoke the others) at its epoch
    a2 = h.hb(a.member_id, 1, owned=ps(0, 1, 2, 3))
    assert a2.member_epoch == 1 and a2.assignment is not None and len(a2.assignment) == 2
    assert h.member(a.member_id).state is MemberState.UNREVOKED_PARTITIONS
    revoked = ps(0, 1, 2, 3) - a2.assignment
    # b asks again: the two are still a's (pending revocation), so b still gets nothing
    assert h.hb(b.member_id, 2).assignment == frozenset()
    # a heartbeats without saying what it owns: no progress
    assert h.hb(a.member_id, 1).member_epoch == 1
    # a acknowledges: it owns only what it keeps; its epoch advances
    a3 = h.hb(a.member_id, 1, owned=a2.assignment)
    assert a3.member_epoch == 2 and a3.assignment == a2.assignment
    # now b gets the released partitions, in the same epoch
    b2 = h.hb(b.member_id, 2, owned=frozenset())
    assert b2.member_epoch == 2 and b2.assignment == revoked
    assert h.sm.groups[G].consumer.state() == "Stable"  # type: ignore[union-attr]


def test_the_previous_epoch_is_accepted_once_when_a_response_was_lost() -> None:
    h = Harness()
    a = h.join()
    h.join()
    a2 = h.hb(a.member_id, 1, owned=ps(0, 1, 2, 3))
    h.hb(a.member_id, 1, owned=a2.assignment)  # answered with epoch 2, but say the answer is lost
    again = h.hb(a.member_id, 1, owned=a2.assignment)
    assert again.error == 0 and again.member_epoch == 2
    # owning a partition it no longer has at the previous epoch: fenced
    assert h.hb(a.member_id, 1, owned=ps(0, 1, 2, 3)).error == E.FENCED_MEMBER_EPOCH
    assert h.hb(a.member_id, 7).error == E.FENCED_MEMBER_EPOCH
    assert h.hb("ghost", 3).error == E.UNKNOWN_MEMBER_ID


def test_leaving_frees_the_partitions_for_the_others() -> None:
    h = Harness()
    a, b = h.settle([h.join(), h.join()])
    assert sorted(len(r.assignment or ()) for r in (a, b)) == [2, 2]
    left = h.hb(b.member_id, -1)
    assert left.error == 0 and left.member_epoch == -1
    a2 = h.ack(a)
    assert a2.assignment == ps(0, 1, 2, 3) and a2.member_epoch == 3
    keys = [rec.decode_key(w.key) for w in h.writes if w.value is None]
    assert {k.kind for k in keys if isinstance(k, rec.ConsumerKey) and k.member == b.member_id} == {
        rec.CONSUMER_CURRENT, rec.CONSUMER_TARGET_MEMBER, rec.CONSUMER_MEMBER}
    assert h.hb(b.member_id, b.member_epoch).error == E.UNKNOWN_MEMBER_ID


def test_a_silent_member_is_removed_after_the_session_timeout() -> None:
    h = Harness()
    a, b = h.settle([h.join(), h.join()])
    for _ in range(3):  # a keeps heartbeating, b falls silent
        h.advance(SESSION // 3)
        a = h.ack(a)
    h.advance(SESSION // 3)
    assert b.member_id not in h.sm.groups[G].consumer.members  # type: ignore[union-attr]
    assert h.ack(a).assignment == ps(0, 1, 2, 3)


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() -> None:
    h = Harness()
    a = h.join()
    b = h.join()
    h.hb(a.member_id, 1, owned=ps(0, 1, 2, 3))  # told to revoke two
    h.advance(REBALANCE - 1)
    h.hb(b.member_id, 2)
    h.hb(a.member_id, 1, owned=ps(0, 1, 2, 3))  # heartbeats, but keeps everything
    h.advance(1)
    assert a.member_id not in h.sm.groups[G].consumer.members  # type: ignore[union-attr]
    # b, given nothing yet at epoch 2, goes to the next epoch with all four
    b2 = h.hb(b.member_id, 2)
    assert b2.assignment == ps(0, 1, 2, 3) and b2.member_epoch == 3


# ---- static members ---------------------------------------------------------------------------
def test_a_static_member_rejoins_with_its_partitions_and_no_rebalance() -> None:
    h = Harness()
    a, b = h.settle([h.join(instance="i-a"), h.join(instance="i-b")])
    cg = h.sm.groups[G].consumer
    assert cg is not None
    epoch = cg.group_epoch
    # another process with the same instance id while a is still there
    assert h.hb(instance="i-a").error == E.UNRELEASED_INSTANCE_ID
    assert h.hb(a.member_id, -2, instance="i-a").member_epoch == -2
    back = h.join(member_id="new-a", instance="i-a")
    assert back.member_id == "new-a" and back.assignment == a.assignment and back.member_epoch == a.member_epoch
    assert cg.group_epoch == epoch and a.member_id not in cg.members
    assert h.ack(b).assignment == b.assignment


def test_a_static_member_that_does_not_come_back_is_removed_after_its_session() -> None:
    h = Harness()
    a, b = h.settle([h.join(instance="i-a"), h.join()])
    h.hb(a.member_id, -2, instance="i-a")
    h.advance(SESSION - 1)
    b = h.ack(b)
    assert a.member_id in h.sm.groups[G].consumer.members  # type: ignore[union-attr]
    h.advance(1)
    assert h.ack(h.ack(b)).assignment == ps(0, 1, 2, 3)


# ---- subscriptions and assignors ---------------------------------------------------------------
def test_a_regex_subscription_picks_up_a_new_topic() -> None:
    h = Harness({"orders-1": (T, 2), "other": (uuid.UUID(int=9), 2)})
    a = h.join(topics=None, regex="orders-.*")
    assert a.assignment == ps(0, 1)
    h.topics["orders-2"] = (U, 3)
    a2 = h.ack(a)
    assert a2.assignment == ps(0, 1) | ps(0, 1, 2, topic=U) and a2.member_epoch == a.member_epoch + 1
    assert h.hb(topics=None, regex="orders-(").error == E.INVALID_REGULAR_EXPRESSION


def test_a_subscription_change_moves_the_target() -> None:
    h = Harness({"t": (T, 2), "u": (U, 2)})
    a = h.join(topics=("t",))
    assert a.assignment == ps(0, 1)
    r = h.hb(a.member_id, a.member_epoch, topics=("u",), owned=a.assignment)
    assert r.assignment == frozenset()  # revoke t first
    assert h.ack(r).assignment == ps(0, 1, topic=U)


def test_uniform_is_balanced_and_sticky() -> None:
    topics = {"t": (T, 7), "u": (U, 5)}
    subs = {m: frozenset({"t", "u"}) for m in ("a", "b", "c")}
    first = uniform(subs, topics, {})
    assert sorted(len(v) for v in first.values()) == [4, 4, 4]
    assert frozenset().union(*first.values()) == ps(*range(7)) | ps(*range(5), topic=U)
    second = uniform({**subs, "d": frozenset({"t", "u"})}, topics, first)
    assert sorted(len(v) for v in second.values()) == [3, 3, 3, 3]
    assert all(len(second[m] & first[m]) == 3 for m in ("a", "b", "c"))  # each gave up one, kept the rest
    # different subscriptions: u's partitions only go to who subscribes to u
    mixed = uniform({"a": frozenset({"t"}), "b": frozenset({"t", "u"})}, topics, {})
    assert all(tid == T for tid, _ in mixed["a"]) and sorted(len(v) for v in mixed.values()) == [6, 6]


def test_range_gives_contiguous_ranges_per_topic() -> None:
    topics = {"t": (T, 5), "u": (U, 5)}
    out = range_({"b": frozenset({"t", "u"}), "a": frozenset({"t", "u"})}, topics, {})
    assert out["a"] == ps(0, 1, 2) | ps(0, 1, 2, topic=U) and out["b"] == ps(3, 4) | ps(3, 4, topic=U)


def test_the_group_uses_the_assignor_its_members_ask_for() -> None:
    h = Harness({"t": (T, 3)}, assignors=("uniform", "range"))
    assert h.hb(assignor="sticky").error == E.UNSUPPORTED_ASSIGNOR
    a, b = h.settle([h.join(assignor="range", member_id="a"), h.join(assignor="range", member_id="b")])
    assert a.assignment == ps(0, 1) and b.assignment == ps(2)
    _, d = h.sm.describe_consumer_group(G)
    assert d is not None and d.assignor == "range"


# ---- the offsets' member checks ----------------------------------------------------------------
def test_offset_commits_and_fetches_check_the_member_epoch() -> None:
    h = Harness()
    a = h.join()
    tp = {("t", 0): OffsetCommitIn(5)}
    assert h.sm.commit_offsets(G, a.member_id or "", None, a.member_epoch, tp, h.now).errors == {("t", 0): 0}
    assert h.sm.commit_offsets(G, a.member_id or "", None, a.member_epoch - 1, tp, h.now).errors == {
        ("t", 0): E.STALE_MEMBER_EPOCH}
    assert h.sm.commit_offsets(G, "ghost", None, 1, tp, h.now).errors == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.sm.commit_offsets(G, "", None, -1, tp, h.now).errors == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.sm.prepare_txn_offsets(G, 7, 0, tp, h.now, member_id=a.member_id or "", generation=0).errors == {
        ("t", 0): E.ILLEGAL_GENERATION}
    assert h.sm.prepare_txn_offsets(G, 7, 0, tp, h.now).errors == {("t", 0): 0}
    assert h.sm.fetch_offsets(G, [("t", 0)], False, a.member_id, a.member_epoch)[0] == 0
    assert h.sm.fetch_offsets(G, [("t", 0)], False, a.member_id, 0)[0] == E.STALE_MEMBER_EPOCH
    assert h.sm.fetch_offsets(G, [("t", 0)], False, "ghost", 1)[0] == E.UNKNOWN_MEMBER_ID
    assert h.sm.fetch_offsets(G, [("t", 0)], False)[0] == 0  # the admin client
    h.hb(a.member_id or "", -1)
    assert h.sm.commit_offsets(G, "", None, -1, tp, h.now).errors == {("t", 0): 0}  # empty: anyone


def test_an_offset_commit_below_v9_from_a_consumer_protocol_member_is_unsupported_version() -> None:
    """Kafka's ConsumerGroup.validateOffsetCommit: a member of the new protocol must commit with v9+
    (its member id and epoch); an older version is UNSUPPORTED_VERSION once the member is known,
    while an unknown member is still UNKNOWN_MEMBER_ID and a transaction's commit is not held to it."""
    h = Harness()
    a = h.join()
    tp = {("t", 0): OffsetCommitIn(5)}
    mid = a.member_id or ""
    assert h.sm.commit_offsets(G, mid, None, a.member_epoch, tp, h.now, api_version=8).errors == {
        ("t", 0): E.UNSUPPORTED_VERSION}
    assert h.sm.commit_offsets(G, "ghost", None, 1, tp, h.now, api_version=8).errors == {
        ("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.sm.commit_offsets(G, mid, None, a.member_epoch, tp, h.now, api_version=9).errors == {("t", 0): 0}
    assert h.sm.prepare_txn_offsets(G, 7, 0, tp, h.now, member_id=mid, generation=a.member_epoch).errors == {
        ("t", 0): 0}
    h.hb(mid, -1)
    assert h.sm.commit_offsets(G, "", None, -1, tp, h.now, api_version=2).errors == {("t", 0): 0}  # empty group


# ---- classic and consumer groups side by side --------------------------------------------------
def classic_join(h: Harness, group: str = G) -> JoinResult | None:
    token = next(h.tokens)
    h.sm.join_group(token, JoinRequest(group, "", None, "c", "/h", 10_000, 10_000, "consumer",
                                       [("range", b"")], False), h.now)
    h.sm.tick(h.now)  # the initial rebalance delay (0) ends
    for t, r in h.sm.drain().replies:
        if t == token:
            assert isinstance(r, JoinResult)
            return r
    return None


def test_classic_and_consumer_groups_do_not_take_each_others_members() -> None:
    h = Harness()
    h.join(group="new")
    r = classic_join(h, "new")
    assert r is not None and r.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert classic_join(h, "old") is not None  # the join phase completes (no initial delay)
    assert h.hb(group="old").error == E.GROUP_ID_NOT_FOUND
    err, groups = h.sm.list_groups()
    assert sorted(groups) == [("new", "consumer", "Stable", "consumer"), ("old", "consumer", "CompletingRebalance",
                                                                            "classic")]
    assert h.sm.list_groups(None, ["consumer"])[1] == [("new", "consumer", "Stable", "consumer")]
    assert h.sm.describe_group("new")[0] == E.GROUP_ID_NOT_FOUND
    assert h.sm.describe_consumer_group("old")[0] == E.GROUP_ID_NOT_FOUND


def test_an_empty_group_converts_to_the_protocol_of_its_next_member_keeping_its_offsets() -> None:
    h = Harness()
    plan = h.sm.commit_offsets(G, "", None, -1, {("t", 1): OffsetCommitIn(9)}, h.now)
    h.sm.offsets_written(plan, 0)
    r = classic_join(h)
    assert r is not None and r.error == 0
    h.sm.leave_group(G, [(r.member_id, None)], h.now)
    h.pump()
    a = h.join()  # the classic group is empty: it becomes a consumer group
    assert a.member_epoch == 1 and h.sm.groups[G].consumer is not None
    assert any(w.value is None and rec.decode_key(w.key) == rec.GroupKey(G) for w in h.writes)
    h.hb(a.member_id or "", -1)
    r2 = classic_join(h)  # and back, once the last member left
    assert r2 is not None and r2.error == 0 and h.sm.groups[G].consumer is None
    assert h.sm.fetch_offsets(G, [("t", 1)], False)[1][0].offset == 9


# ---- the records and a reload ------------------------------------------------------------------
def reload(h: Harness) -> Harness:
    """A new coordinator that reads back what `h` wrote."""
    n = Harness(h.topics)
    n.sm.owned.clear()
    for p in range(4):
        n.sm.begin_loading(p, 1)
    for i, w in enumerate(h.writes):
        n.sm.load_record(w.partition, w.key, w.value, i)
    for p in range(4):
        n.sm.finish_loading(p, n.now)
    n.pump()
    return n


def test_a_group_read_back_from_its_records_goes_on_where_it_was() -> None:
    h = Harness()
    a = h.join(instance="i-a")
    b = h.join()
    a2 = h.hb(a.member_id or "", 1, owned=ps(0, 1, 2, 3))  # a is revoking when the coordinator moves
    n = reload(h)
    cg, old = n.sm.groups[G].consumer, h.sm.groups[G].consumer
    assert cg is not None and old is not None
    assert (cg.group_epoch, cg.assignment_epoch, cg.target, cg.static) == (
        old.group_epoch, old.assignment_epoch, old.target, old.static)
    assert cg.members == old.members
    # the members go on with their epochs: a acknowledges its revocation, b gets the partitions
    a3 = n.hb(a.member_id or "", 1, owned=a2.assignment)
    assert a3.error == 0 and a3.member_epoch == 2
    b2 = n.hb(b.member_id or "", 2, owned=frozenset())
    assert b2.assignment == ps(0, 1, 2, 3) - (a2.assignment or frozenset())
    # and their sessions run from the load: a silent member still goes
    n.advance(SESSION)
    assert not cg.members


def test_a_deleted_consumer_group_stays_deleted_after_a_reload() -> None:
    h = Harness()
    a = h.join()
    h.hb(a.member_id or "", -1)
    assert h.sm.delete_groups([G], h.now) == {G: 0}
    h.pump()
    assert G not in reload(h).sm.groups


# ---- online upgrade and downgrade (KIP-848, group.consumer.migration.policy) -------------------
def subscription(topics: list[str], owned: list[tuple[str, int]] | None = None) -> bytes:
    """ConsumerProtocolSubscription v1, by hand: version, topics, null user data, owned partitions."""
    raw = struct.pack(">hi", 1, len(topics)) + b"".join(struct.pack(">h", len(t)) + t.encode() for t in topics)
    raw += struct.pack(">i", -1)
    by_topic: dict[str, list[int]] = {}
    for t, p in owned or []:
        by_topic.setdefault(t, []).append(p)
    raw += struct.pack(">i", len(by_topic))
    for t, parts in by_topic.items():
        raw += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(parts)) + b"".join(
            struct.pack(">i", p) for p in parts)
    return raw


def assignment_bytes(topic: str, parts: list[int]) -> bytes:
    return (struct.pack(">hi", 1, 1) + struct.pack(">h", len(topic)) + topic.encode()
            + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts) + struct.pack(">i", -1))


def assigned_in(raw: bytes) -> set[int]:
    from broker.group.classic_protocol import parse_assignment
    return {p for _, p in parse_assignment(raw)}


def reply(h: Harness, token: int) -> JoinResult | SyncResult:
    for t, r in h.sm.drain().replies:
        if t == token:
            return r
    raise AssertionError(f"no reply to {token}")


def classic_member(h: Harness, owned: list[tuple[str, int]] | None = None) -> tuple[str, int]:
    """A classic group G of one member (the consumer protocol, range) that owns every partition."""
    token = next(h.tokens)
    h.sm.join_group(token, JoinRequest(G, "", None, "c", "/h", 10_000, 10_000, "consumer",
                                       [("range", subscription(["t"]))], False), h.now)
    h.sm.tick(h.now)
    j = reply(h, token)
    assert isinstance(j, JoinResult) and j.error == 0 and j.leader == j.member_id
    token = next(h.tokens)
    h.sm.sync_group(token, SyncRequest(G, j.generation_id, j.member_id, None, "consumer", "range",
                                       {j.member_id: assignment_bytes("t", [0, 1, 2, 3])}), h.now)
    s = reply(h, token)
    assert isinstance(s, SyncResult) and s.error == 0
    h.pump()
    return j.member_id, j.generation_id


def rejoin(h: Harness, member_id: str, owned: list[tuple[str, int]]) -> JoinResult:
    token = next(h.tokens)
    h.sm.join_group(token, JoinRequest(G, member_id, None, "c", "/h", 10_000, 10_000, "consumer",
                                       [("range", subscription(["t"], owned))], True), h.now)
    r = reply(h, token)
    h.pump()
    assert isinstance(r, JoinResult)
    return r


def sync(h: Harness, member_id: str, generation: int) -> SyncResult:
    token = next(h.tokens)
    h.sm.sync_group(token, SyncRequest(G, generation, member_id, None, "consumer", "range", {}), h.now)
    r = reply(h, token)
    h.pump()
    assert isinstance(r, SyncResult)
    return r


def test_a_consumer_member_joining_a_classic_group_with_members_upgrades_it() -> None:
    """The classic member becomes a member of the consumer group at its generation with its
    partitions; it is told to rejoin, gives up what the new target moves, and only then does the
    new member get those partitions (never two owners at once)."""
    h = Harness()
    c1, gen = classic_member(h)
    a = h.join()
    g = h.sm.groups[G]
    assert g.consumer is not None and not g.members
    assert any(w.value is None and rec.decode_key(w.key) == rec.GroupKey(G) for w in h.writes)
    old = h.member(c1)
    assert old.classic is not None and old.classic.session_timeout_ms == 10_000
    assert a.member_epoch == gen + 1 and a.assignment == frozenset()  # c1 still holds everything
    assert h.sm.heartbeat(G, c1, None, gen, h.now) == E.REBALANCE_IN_PROGRESS
    assert h.sm.heartbeat(G, c1, None, gen + 7, h.now) == E.ILLEGAL_GENERATION
    j = rejoin(h, c1, [])  # eager: it revoked everything before rejoining
    assert j.error == 0 and j.generation_id == gen + 1 and j.member_id == c1 and j.protocol_name == "range"
    s = sync(h, c1, j.generation_id)
    kept = assigned_in(s.assignment)
    assert s.error == 0 and len(kept) == 2
    assert h.sm.heartbeat(G, c1, None, j.generation_id, h.now) == 0
    r = h.ack(a)
    assert {p for _, p in r.assignment or ()} == {0, 1, 2, 3} - kept
    # offsets: the classic member commits with its generation; a wrong one is ILLEGAL_GENERATION
    tp = {("t", 0): OffsetCommitIn(5)}
    assert h.sm.commit_offsets(G, c1, None, j.generation_id, tp, h.now, api_version=8).errors == {("t", 0): 0}
    assert h.sm.commit_offsets(G, c1, None, 99, tp, h.now).errors == {("t", 0): E.ILLEGAL_GENERATION}


def test_a_cooperative_classic_member_revokes_before_the_new_member_is_given_its_partitions() -> None:
    h = Harness()
    c1, gen = classic_member(h)
    a = h.join()
    j = rejoin(h, c1, [("t", p) for p in range(4)])  # cooperative: it still owns everything
    assert j.generation_id == gen and h.member(c1).state is MemberState.UNREVOKED_PARTITIONS
    kept = assigned_in(sync(h, c1, j.generation_id).assignment)
    assert len(kept) == 2
    assert h.ack(a).assignment == frozenset()  # not before c1 let them go
    assert h.sm.heartbeat(G, c1, None, j.generation_id, h.now) == E.REBALANCE_IN_PROGRESS
    j2 = rejoin(h, c1, [("t", p) for p in kept])
    assert j2.generation_id == gen + 1 and h.member(c1).state is MemberState.STABLE
    assert {p for _, p in h.ack(a).assignment or ()} == {0, 1, 2, 3} - kept


def test_the_last_consumer_member_leaving_downgrades_the_group_to_classic() -> None:
    h = Harness()
    c1, gen = classic_member(h)
    a = h.join()
    j = rejoin(h, c1, [])
    sync(h, c1, j.generation_id)
    epoch = h.sm.groups[G].consumer.group_epoch  # type: ignore[union-attr]
    h.hb(a.member_id or "", -1)
    g = h.sm.groups[G]
    assert g.consumer is None and list(g.members) == [c1] and g.generation == epoch
    assert g.state.value == "PreparingRebalance" and g.protocol_name == "range"
    assert any(w.value is not None and rec.decode_key(w.key) == rec.GroupKey(G) for w in h.writes)
    assert h.sm.heartbeat(G, c1, None, epoch, h.now) == E.REBALANCE_IN_PROGRESS
    token = next(h.tokens)
    h.sm.join_group(token, JoinRequest(G, c1, None, "c", "/h", 10_000, 10_000, "consumer",
                                       [("range", subscription(["t"]))], True), h.now)
    r = reply(h, token)
    assert isinstance(r, JoinResult) and r.error == 0 and r.generation_id == epoch + 1 and r.leader == c1


def test_a_classic_member_that_does_not_rejoin_within_its_rebalance_timeout_is_removed() -> None:
    h = Harness()
    c1, gen = classic_member(h)
    a = h.join()
    assert h.sm.heartbeat(G, c1, None, gen, h.now) == E.REBALANCE_IN_PROGRESS
    h.advance(6_000)
    assert h.sm.heartbeat(G, c1, None, gen, h.now) == E.REBALANCE_IN_PROGRESS  # its session goes on
    cg = h.sm.groups[G].consumer
    assert cg is not None and c1 in cg.members
    h.advance(4_001)  # the rebalance timeout (10 s) from the first REBALANCE_IN_PROGRESS
    cg = h.sm.groups[G].consumer
    assert cg is not None and list(cg.members) == [a.member_id]
    assert {p for _, p in h.ack(a).assignment or ()} == {0, 1, 2, 3}


def test_the_migration_policy_can_forbid_an_upgrade_or_a_downgrade() -> None:
    h = Harness()
    h.sm.table.settings = dataclasses.replace(h.sm.table.settings, consumer_migration_policy="downgrade")
    classic_member(h)
    assert h.hb().error == E.GROUP_ID_NOT_FOUND
    h2 = Harness()
    h2.sm.table.settings = dataclasses.replace(h2.sm.table.settings, consumer_migration_policy="upgrade")
    c1, _ = classic_member(h2)
    a = h2.join()
    h2.hb(a.member_id or "", -1)
    g = h2.sm.groups[G]
    assert g.consumer is not None and list(g.consumer.members) == [c1]  # stays a consumer group


def test_a_group_with_classic_members_is_read_back_with_them() -> None:
    h = Harness()
    c1, _ = classic_member(h)
    h.join()
    n = reload(h)
    m = n.member(c1)
    assert m.classic == h.member(c1).classic and m.classic is not None and m.classic.protocols[0][0] == "range"
    assert n.sm.heartbeat(G, c1, None, m.member_epoch, n.now) == E.REBALANCE_IN_PROGRESS
