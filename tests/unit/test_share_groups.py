"""KIP-932 share groups in the group coordinator's state machine: members join and get partitions
from the simple assignor (shared when members outnumber partitions), leave or time out, epochs fence
stale members, the kinds of group do not mix, and the group reads back from its records."""

from __future__ import annotations

import itertools
import uuid

from broker.group import records as rec
from broker.group.assignors import simple
from broker.group.consumer import ConsumerHeartbeat, HeartbeatResult
from broker.group.model import Now, Write
from broker.group.share import ShareHeartbeat
from broker.group.state import GroupStateMachine, Settings
from protocol.clock import ManualClock
from protocol.errors import ErrorCode as E

G = "sg"
SESSION = 30_000
T = uuid.UUID(int=1)


def ps(*parts: int) -> frozenset[tuple[uuid.UUID, int]]:
    return frozenset((T, p) for p in parts)


class Harness:
    def __init__(self, topics: dict[str, tuple[uuid.UUID, int]] | None = None) -> None:
        ids = itertools.count(1)
        self.topics = dict(topics if topics is not None else {"t": (T, 2)})
        settings = Settings(num_partitions=4, share_session_timeout_ms=SESSION, share_heartbeat_interval_ms=500)
        self.sm = GroupStateMachine(settings, lambda t, p: True, new_member_id=lambda prefix: f"m{next(ids)}",
                                    topics=lambda: self.topics)
        self.clock = ManualClock()
        self.sm.own_partitions(range(4), self.now)
        self.writes: list[Write] = []

    @property
    def now(self) -> Now:
        return Now.of(self.clock)

    def hb(self, member_id: str = "", epoch: int = 0, topics: tuple[str, ...] | None = ("t",),
           group: str = G) -> HeartbeatResult:
        r = self.sm.share_heartbeat(ShareHeartbeat(group, member_id, epoch, None, topics if epoch == 0 else None,
                                                   "client", "/127.0.0.1"), self.now)
        self.writes += self.sm.drain().writes
        return r

    def join(self, member_id: str = "") -> HeartbeatResult:
        r = self.hb(member_id)
        assert r.error == 0, r
        return r

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.sm.tick(self.now)
        self.writes += self.sm.drain().writes


def test_the_simple_assignor_shares_partitions_when_members_outnumber_them() -> None:
    topics = {"t": (T, 2)}
    three = simple({m: frozenset({"t"}) for m in ("a", "b", "c")}, topics)
    assert three == {"a": ps(0), "b": ps(1), "c": ps(0)}
    one = simple({"a": frozenset({"t"})}, topics)
    assert one == {"a": ps(0, 1)}
    four = simple({"a": frozenset({"t"}), "b": frozenset({"t"})}, {"t": (T, 4)})
    assert four == {"a": ps(0, 2), "b": ps(1, 3)}


def test_members_get_their_assignment_at_once_and_several_share_a_partition() -> None:
    h = Harness({"t": (T, 1)})
    a = h.join("a")
    assert (a.member_id, a.member_epoch, a.assignment) == ("a", 1, ps(0))
    b = h.join("b")
    assert (b.member_epoch, b.assignment) == (2, ps(0))  # no revocation: both hold partition 0
    a2 = h.hb("a", 1)
    assert (a2.error, a2.member_epoch, a2.assignment) == (0, 2, ps(0))
    s = h.sm.describe_share_group(G)[1]
    assert s is not None and s.state == "Stable" and {m.member_id for m in s.members} == {"a", "b"}
    assert h.sm.list_groups()[1] == [(G, "share", "Stable", "share")]


def test_a_stale_epoch_is_fenced_and_an_unknown_member_refused() -> None:
    h = Harness()
    h.join("a")
    h.join("b")
    assert h.hb("a", 5).error == E.FENCED_MEMBER_EPOCH
    assert h.hb("zz", 1).error == E.UNKNOWN_MEMBER_ID
    assert h.hb("", 0, topics=None).error == E.INVALID_REQUEST


def test_a_member_that_leaves_or_goes_silent_is_removed_and_the_rest_take_its_partitions() -> None:
    h = Harness()
    h.join("a")
    h.join("b")
    left = h.hb("b", -1)
    assert (left.error, left.member_epoch) == (0, -1)
    a = h.hb("a", 1)  # a is still at the epoch it joined with: it catches up at once
    assert (a.member_epoch, a.assignment) == (3, ps(0, 1))
    h.join("c")
    h.advance(SESSION - 1)
    assert h.hb("a", 3).error == 0  # a heartbeats, c does not
    h.advance(1)
    g = h.sm.groups[G]
    assert g.share is not None and set(g.share.members) == {"a"}
    h.advance(SESSION)
    assert g.share.state() == "Empty"


def test_share_consumer_and_classic_groups_do_not_mix() -> None:
    h = Harness()
    h.join("a")
    r = h.sm.consumer_heartbeat(ConsumerHeartbeat(G, "", 0, None, None, 1000, ("t",), None, None, frozenset()),
                                h.now)
    assert r.error == E.GROUP_ID_NOT_FOUND
    c = h.sm.consumer_heartbeat(ConsumerHeartbeat("cg", "", 0, None, None, 1000, ("t",), None, None, frozenset()),
                                h.now)
    assert c.error == 0
    assert h.hb("x", 0, group="cg").error == E.GROUP_ID_NOT_FOUND


def test_a_share_group_reads_back_from_its_records() -> None:
    h = Harness()
    h.join("a")
    h.join("b")
    h.hb("b", -1)
    assert h.hb("a", 1).member_epoch == 3
    n = Harness(h.topics)
    n.sm.owned.clear()
    for p in range(4):
        n.sm.begin_loading(p, 1)
    for i, w in enumerate(h.writes):
        n.sm.load_record(w.partition, w.key, w.value, i)
    for p in range(4):
        n.sm.finish_loading(p, n.now)
    sg, old = n.sm.groups[G].share, h.sm.groups[G].share
    assert sg is not None and old is not None
    assert (sg.group_epoch, sg.assignment_epoch, sg.members, sg.target) == (
        old.group_epoch, old.assignment_epoch, old.members, old.target)
    assert n.hb("a", 3).error == 0  # it goes on with its epoch
    n.advance(SESSION)
    assert not sg.members  # and its session runs from the load
    kinds = {rec.decode_key(w.key).kind for w in h.writes}  # type: ignore[union-attr]
    assert kinds == set(rec.SHARE_KINDS)
