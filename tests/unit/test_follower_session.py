"""The follower's fetch session (broker/replication/follower_session.py): what each fetch lists and
forgets, how it starts over, and — driven against the leader's cache (broker/fetch_session.py)
through lost answers, reconnects and evictions — that the leader's session always holds exactly the
partitions the follower wants, at the positions it last asked for."""

from __future__ import annotations

import random
import uuid

from broker.fetch_session import FetchSessionCache
from broker.replication.follower_session import FetchPlan, FetchState, FollowerSession, Key
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, PartitionData

A, B, C = ("t", 0), ("t", 1), ("u", 0)
IDS = {"t": uuid.UUID(int=1), "u": uuid.UUID(int=2)}


def st(offset: int = 0, epoch: int = 1, max_bytes: int = 1000, topic_id: uuid.UUID = IDS["t"]) -> FetchState:
    return FetchState(topic_id=topic_id, fetch_offset=offset, current_leader_epoch=epoch, last_fetched_epoch=epoch,
                      log_start_offset=0, max_bytes=max_bytes)


def test_the_first_fetch_is_full_and_opens_a_session() -> None:
    s = FollowerSession()
    plan = s.plan({A: st(), B: st()})
    assert (plan.session_id, plan.epoch, plan.full) == (0, 0, True)
    assert list(plan.send) == [A, B] and plan.forget == []
    s.on_response(plan, 0, 42)
    assert (s.session_id, s.epoch) == (42, 1)


def test_an_incremental_fetch_lists_changes_and_joiners_and_forgets_leavers() -> None:
    s = FollowerSession()
    s.on_response(s.plan({A: st(), B: st(), C: st()}), 0, 42)
    plan = s.plan({A: st(offset=5), B: st(), ("v", 0): st()})
    assert (plan.session_id, plan.epoch, plan.full) == (42, 1, False)
    assert list(plan.send) == [A, ("v", 0)] and plan.forget == [(C, IDS["t"])]
    s.on_response(plan, 0, 42)
    assert s.epoch == 2
    # nothing changed: nothing listed, nothing forgotten, still a fetch of the whole session
    plan = s.plan({A: st(offset=5), B: st(), ("v", 0): st()})
    assert plan.send == {} and plan.forget == [] and not plan.full


def test_every_field_of_the_fetch_state_is_a_change() -> None:
    s = FollowerSession()
    s.on_response(s.plan({A: st()}), 0, 42)
    for changed in [st(offset=1), st(epoch=2), st(max_bytes=10),
                    FetchState(IDS["t"], 0, 1, 1, log_start_offset=3, max_bytes=1000),
                    FetchState(IDS["t"], 0, 1, last_fetched_epoch=0, log_start_offset=0, max_bytes=1000),
                    st(topic_id=IDS["u"])]:
        assert list(s.plan({A: changed}).send) == [A]


def test_session_errors_and_a_closed_session_start_over_with_a_full_fetch() -> None:
    for code, session_id, close in [(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, 0),
                                    (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, 42),
                                    (ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, 0, 42),
                                    (0, 0, 0)]:  # the leader closed the session (or had no room)
        s = FollowerSession()
        s.on_response(s.plan({A: st()}), 0, 42)
        s.on_response(s.plan({A: st()}), code, session_id)
        plan = s.plan({A: st(), B: st()})
        assert plan.full and (plan.session_id, plan.epoch) == (close, 0) and list(plan.send) == [A, B]


def test_reset_makes_the_next_fetch_full() -> None:
    s = FollowerSession()
    s.on_response(s.plan({A: st()}), 0, 42)
    s.reset(new_connection=False)
    assert (s.plan({A: st()}).session_id, s.plan({A: st()}).full) == (42, True)  # closes 42 as it opens anew
    s.reset(new_connection=True)
    assert (s.plan({A: st()}).session_id, s.plan({A: st()}).full) == (0, True)  # 42 went with its connection


# ---- against the leader's cache ---------------------------------------------------------------------------
class Leader:
    """The leader's session cache, answered as broker/apis/fetch.py answers it."""

    def __init__(self, slots: int = 1000) -> None:
        self.cache = FetchSessionCache(slots=slots, rng=random.Random(7))
        self.conn = 1
        self.names: dict[uuid.UUID, str] = {}
        self.read: list[Key] = []  # what the last fetch read, by topic name

    def fetch(self, plan: FetchPlan) -> tuple[int, int, list[Key]]:
        """Keyed by topic id, as a v13+ leader; `read` and the answer name partitions as the follower does."""
        wanted = [((f.topic_id, k[1]), FetchPartition(partition=k[1], fetch_offset=f.fetch_offset,
                                                       partition_max_bytes=f.max_bytes)) for k, f in plan.send.items()]
        self.names.update({f.topic_id: k[0] for k, f in plan.send.items()})
        ctx = self.cache.new_context(session_id=plan.session_id, epoch=plan.epoch, wanted=wanted,
                                     forgotten=[(i, k[1]) for k, i in plan.forget], uses_ids=True, owner=self.conn,
                                     privileged=True, now_ms=0)
        self.read = [(self.names[i], p) for (i, p), _ in ctx.partitions]  # type: ignore[index]
        answers = [(k, PartitionData(partition_index=k[1], error_code=0, high_watermark=p.fetch_offset,
                                     records=b"")) for k, p in ctx.partitions]
        sid, err, listed = self.cache.respond(ctx, answers, 0)
        return sid, err, [(self.names[i], p) for (i, p), _ in listed]  # type: ignore[index]

    def reconnect(self) -> None:
        self.cache.close_owner(self.conn)
        self.conn += 1

    def positions(self, session_id: int) -> dict[Key, tuple[uuid.UUID, int]]:
        """Partition (by name) -> (topic id, fetch offset) the leader's session holds."""
        s = self.cache.get(session_id)
        assert s is not None
        return {(self.names[i], p): (i, fp.fetch_offset) for (i, p), fp in s.partitions.items()}  # type: ignore[index]


def fetch(leader: Leader, follower: FollowerSession, wanted: dict[Key, FetchState]) -> tuple[int, int, list[Key]]:
    plan = follower.plan(wanted)
    sid, err, listed = leader.fetch(plan)
    follower.on_response(plan, err, sid)
    return sid, err, listed


def test_a_partition_followed_after_the_session_opened_is_fetched_and_an_unfollowed_one_forgotten() -> None:
    leader, follower = Leader(), FollowerSession()
    sid, _, _ = fetch(leader, follower, {A: st(), B: st()})
    assert sid > 0
    _, _, listed = fetch(leader, follower, {A: st(), B: st(), C: st(offset=4, topic_id=IDS["u"])})
    assert leader.read == [A, B, C] and listed == [C]  # C's first answer: the leader reads it from now on
    _, _, listed = fetch(leader, follower, {A: st(), C: st(offset=4, topic_id=IDS["u"])})
    assert leader.read == [A, C] and leader.positions(sid) == {A: (IDS["t"], 0), C: (IDS["u"], 4)}


def test_a_topic_created_again_under_its_name_is_fetched_by_its_new_id() -> None:
    """Even at the same position (an empty partition, the same epochs): the leader must stop
    reading the old topic's partition and read the new one's."""
    leader, follower = Leader(), FollowerSession()
    sid, _, _ = fetch(leader, follower, {A: st(), B: st()})
    new = uuid.UUID(int=9)
    plan = follower.plan({A: st(topic_id=new), B: st()})
    assert list(plan.send) == [A] and plan.forget == [(A, IDS["t"])]
    fetch(leader, follower, {A: st(topic_id=new), B: st()})
    assert leader.positions(sid) == {B: (IDS["t"], 0), A: (new, 0)}


def test_the_leaders_session_is_always_what_the_follower_wants() -> None:
    """Random follows, unfollows, fetch progress and topics created again under their name, with
    answers lost, connections dropped, answers thrown away and sessions evicted: whenever the
    leader's answer reached the follower, the leader read every wanted partition, at the wanted
    position, and nothing else."""
    rng = random.Random(2024)
    keys = [(t, p) for t in "abc" for p in range(4)]
    for _ in range(50):
        leader, follower = Leader(), FollowerSession()
        ids = {t: uuid.uuid4() for t in "abc"}
        wanted = {k: st(topic_id=ids[k[0]]) for k in rng.sample(keys, 5)}
        for _ in range(60):
            r = rng.random()
            if r < 0.15:
                wanted.pop(rng.choice(list(wanted)), None)
            elif r < 0.3:
                k = rng.choice(keys)
                wanted[k] = st(offset=rng.randrange(10), topic_id=ids[k[0]])
            elif r < 0.35:  # deleted and created again: a new id, the same (empty) position
                t = rng.choice("abc")
                ids[t] = uuid.uuid4()
                wanted = {k: st(topic_id=ids[t]) if k[0] == t else f for k, f in wanted.items()}
            elif r < 0.5 and wanted:
                k = rng.choice(list(wanted))
                wanted[k] = st(offset=wanted[k].fetch_offset + 1, epoch=rng.choice([1, 2]), topic_id=ids[k[0]])
            if not wanted:
                wanted = {keys[0]: st(topic_id=ids[keys[0][0]])}
            plan = follower.plan(wanted)
            fault = rng.random()
            if fault < 0.05:  # the connection dropped before the leader saw the request
                leader.reconnect()
                follower.reset(new_connection=True)
                continue
            sid, err, _ = leader.fetch(plan)
            if fault < 0.1:  # ... or after: the answer is lost
                leader.reconnect()
                follower.reset(new_connection=True)
                continue
            follower.on_response(plan, err, sid)
            if err:
                continue  # the follower starts over; nothing was read
            assert sorted(leader.read) == sorted(wanted)
            if sid:
                assert leader.positions(sid) == {k: (f.topic_id, f.fetch_offset) for k, f in wanted.items()}
            if fault < 0.15:  # an answer the fetcher threw away (its partition moved meanwhile)
                follower.reset(new_connection=False)
            elif fault < 0.2 and sid:  # the leader evicted the session
                leader.cache.close_owner(leader.conn)


def test_a_leader_without_room_is_fetched_from_in_full_every_time() -> None:
    leader, follower = Leader(slots=0), FollowerSession()
    for _ in range(3):
        sid, err, listed = fetch(leader, follower, {A: st(), B: st()})
        assert (sid, err, listed) == (0, 0, [A, B])
    assert follower.plan({A: st()}).full
