"""The group coordinator as a state machine: events in (with the time), results and effects out.

No asyncio, no sockets, no files: the asyncio wrapper (coordinator.py) parks requests under
integer tokens, writes the records this machine asks for, and calls `tick` when `next_deadline`
comes. Everything here is therefore deterministic and testable without a broker.

The rules are Kafka's classic group protocol (see docs/groups.md for the walk-through):

* Empty -> PreparingRebalance when the first member joins (after the initial rebalance delay,
  extended while new members keep arriving), or from Stable/CompletingRebalance when membership
  or a member's protocols change.
* PreparingRebalance -> CompletingRebalance when every known member has rejoined (or the
  rebalance timeout passed: dynamic members that did not rejoin are dropped). The generation
  goes up, a protocol is voted, the leader receives every member's metadata.
* CompletingRebalance -> Stable when the leader's SyncGroup assignment is stored; members that
  never send SyncGroup within the rebalance timeout are dropped and the group rebalances again.
* Any member that stops heartbeating for its session timeout is dropped.
"""

from __future__ import annotations

import heapq
import itertools
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from protocol.errors import ErrorCode

from ..partitioning import partition_for
from . import records as rec
from .model import (
    CommitPlan,
    Effects,
    FetchedOffset,
    Group,
    GroupState,
    GroupSummary,
    JoinedMember,
    JoinRequest,
    JoinResult,
    Member,
    MemberSummary,
    OffsetCommitIn,
    OffsetEntry,
    SyncRequest,
    SyncResult,
    TopicPartition,
    Write,
)
from .subscriptions import CONSUMER_PROTOCOL_TYPE, subscribed_topics

E = ErrorCode
EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE,
    GroupState.DEAD,
)
NO_OFFSET = -1
# A member's first JoinGroup may wait a whole rebalance; it cannot heartbeat meanwhile, so it gets
# this long (Kafka's fixed value) instead of its session timeout before it is given up on.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE: all of them, no ACLs yet


@dataclass(frozen=True, slots=True)
class Settings:
    num_partitions: int = 50
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    offsets_retention_ms: int = 10080 * 60 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    max_group_size: int = 2_147_483_647  # Kafka's group.max.size; its default is Integer.MAX_VALUE


@dataclass(slots=True)
class _Loading:
    """What has been read back from one `__consumer_offsets` partition so far."""

    groups: dict[str, rec.GroupValue | None]
    offsets: dict[str, dict[TopicPartition, OffsetEntry | None]]
    txn: dict[int, dict[str, dict[TopicPartition, OffsetEntry]]]


TimerKey = tuple[str, ...]


class GroupStateMachine:
    """Every group of the `__consumer_offsets` partitions this broker owns."""

    def __init__(self, settings: Settings, partition_exists: Callable[[str, int], bool],
                 new_member_id: Callable[[str], str] | None = None) -> None:
        self.settings = settings
        self._partition_exists = partition_exists
        self._new_member_id = new_member_id or (lambda prefix: f"{prefix}-{uuid.uuid4()}")
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()
        self.loading: dict[int, _Loading] = {}
        self.active = True
        self._txn_groups: dict[int, set[str]] = {}  # producer id -> groups with its pending offsets
        self._fx = Effects()
        self._timers: dict[TimerKey, int] = {}
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._seq = itertools.count()

    # ==========================================================================================
    # output and time
    # ==========================================================================================
    def drain(self) -> Effects:
        """The effects accumulated since the last drain: records to write, then replies."""
        fx, self._fx = self._fx, Effects()
        return fx

    def next_deadline(self) -> int | None:
        heap = self._heap
        while heap and self._timers.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def tick(self, now: int) -> None:
        """Fire every timer due at `now`."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, _, key = heapq.heappop(heap)
            if self._timers.get(key) != at:
                continue
            del self._timers[key]
            self._fire(key, now)

    def _schedule(self, key: TimerKey, at: int, *, earlier_only: bool = False) -> None:
        cur = self._timers.get(key)
        if earlier_only and cur is not None and cur <= at:
            return
        self._timers[key] = at
        heapq.heappush(self._heap, (at, next(self._seq), key))

    def _cancel(self, key: TimerKey) -> None:
        self._timers.pop(key, None)

    def _fire(self, key: TimerKey, now: int) -> None:
        kind = key[0]
        if kind == "expire":
            self.expire_offsets(now)
            self._schedule(("expire",), now + self.settings.offsets_retention_check_interval_ms)
            return
        g = self.groups.get(key[1])
        if g is None:
            return
        if kind == "member":
            self._on_session_deadline(g, key[2], now)
        elif kind == "pending":
            self._on_pending_deadline(g, key[2], now)
        elif kind == "join":
            self._on_join_deadline(g, now)
        elif kind == "sync":
            self._on_sync_deadline(g, now)

    # ==========================================================================================
    # ownership and loading
    # ==========================================================================================
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.settings.num_partitions)

    def coordinator_error(self, group_id: str) -> int:
        """0 if this broker serves the group now; else the error that sends the client elsewhere
        (NOT_COORDINATOR) or makes it retry (COORDINATOR_LOAD_IN_PROGRESS / _NOT_AVAILABLE)."""
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE
        p = self.partition_for(group_id)
        if p in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self.owned:
            return E.NOT_COORDINATOR
        return 0

    def own_partitions(self, partitions: Iterable[int], now: int) -> None:
        """Take over partitions that have nothing to load (the topic was just created)."""
        for p in partitions:
            self.owned.add(p)
        self._schedule(("expire",), now + self.settings.offsets_retention_check_interval_ms, earlier_only=True)

    def begin_loading(self, partition: int) -> None:
        self.loading[partition] = _Loading({}, {}, {})

    def load_record(self, partition: int, key: bytes | None, value: bytes | None, log_position: int,
                    producer_id: int = -1) -> None:
        """Replay one record; transactional ones (producer_id >= 0) wait for their marker.
        Raises records.RecordFormatError for bytes we cannot read."""
        ld = self.loading[partition]
        if key is None:
            raise rec.RecordFormatError("record without a key")
        k = rec.decode_key(key)
        if isinstance(k, rec.GroupKey):
            ld.groups[k.group] = None if value is None else rec.decode_group_value(value)
            return
        tp = TopicPartition(k.topic, k.partition)
        entry = None
        if value is not None:
            v = rec.decode_offset_value(value)
            entry = OffsetEntry(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp,
                                log_position)
        if producer_id >= 0:
            if entry is not None:
                ld.txn.setdefault(producer_id, {}).setdefault(k.group, {})[tp] = entry
            return
        if entry is None:
            # a tombstone also cancels the partition's pending transactional offsets, as
            # delete_offsets did in memory: a later commit marker must not bring them back
            for by_group in ld.txn.values():
                by_group.get(k.group, {}).pop(tp, None)
        ld.offsets.setdefault(k.group, {})[tp] = entry

    def load_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        ld = self.loading[partition]
        pending = ld.txn.pop(producer_id, {})
        if not commit:
            return
        for gid, offs in pending.items():
            dest = ld.offsets.setdefault(gid, {})
            for tp, e in offs.items():
                cur = dest.get(tp)
                if cur is None or cur.log_position < e.log_position:
                    dest[tp] = e

    def finish_loading(self, partition: int, now: int) -> None:
        """Turn what was read into live groups: with members they come back Stable and their
        members must heartbeat within a session timeout, as after a coordinator move in Kafka."""
        ld = self.loading.pop(partition)
        for gid in set(ld.groups) | set(ld.offsets):
            value = ld.groups.get(gid)
            offsets = {tp: e for tp, e in ld.offsets.get(gid, {}).items() if e is not None}
            if value is None and not offsets:
                continue
            g = Group(gid, partition, state_timestamp=now)
            g.offsets = offsets
            if value is not None:
                g.protocol_type = value.protocol_type or None
                g.generation = value.generation
                g.protocol_name = value.protocol_name
                g.leader = value.leader
                g.state_timestamp = value.state_timestamp
                for mv in value.members:
                    m = Member(mv.member_id, mv.group_instance_id, mv.client_id, mv.client_host,
                               mv.rebalance_timeout_ms, mv.session_timeout_ms, value.protocol_type,
                               [(value.protocol_name or "", mv.subscription)], mv.assignment)
                    g.members[m.member_id] = m
                    if m.group_instance_id is not None:
                        g.static_members[m.group_instance_id] = m.member_id
                if g.members:
                    g.state = STABLE
                    if g.leader not in g.members:
                        g.leader = next(iter(g.members))
                    for m in g.members.values():
                        self._heartbeat(g, m, now)
                    if len(g.members) > self.settings.max_group_size:
                        # the limit was lowered while the group was away: every member must rejoin,
                        # and those past the limit are turned away then (as Kafka does on load)
                        self._prepare_rebalance(g, now)
                self._snapshot_subscriptions(g)
            self.groups[gid] = g
        for pid, by_group in ld.txn.items():
            for gid, offs in by_group.items():
                tg = self.groups.get(gid)
                if tg is None:
                    tg = self.groups[gid] = Group(gid, partition, state_timestamp=now)
                tg.txn_pending.setdefault(pid, {}).update(offs)
                self._txn_groups.setdefault(pid, set()).add(gid)
        self.owned.add(partition)
        self._schedule(("expire",), now + self.settings.offsets_retention_check_interval_ms, earlier_only=True)

    # ==========================================================================================
    # JoinGroup
    # ==========================================================================================
    def join_group(self, token: int, req: JoinRequest, now: int) -> None:
        """The result arrives as a reply to `token` (at once, or when the join phase ends)."""
        def fail(error: int, member_id: str = req.member_id) -> None:
            self._reply(token, JoinResult(error, member_id=member_id))

        if not req.group_id:
            return fail(E.INVALID_GROUP_ID)
        err = self.coordinator_error(req.group_id)
        if err:
            return fail(err)
        s = self.settings
        if not s.min_session_timeout_ms <= req.session_timeout_ms <= s.max_session_timeout_ms:
            return fail(E.INVALID_SESSION_TIMEOUT)
        unknown = req.member_id == ""
        g = self.groups.get(req.group_id)
        if g is None:
            if not unknown:
                return fail(E.UNKNOWN_MEMBER_ID)
            g = self.groups[req.group_id] = Group(req.group_id, self.partition_for(req.group_id), state_timestamp=now)
        if g.state is DEAD:
            return fail(E.COORDINATOR_NOT_AVAILABLE)
        member = self._joining_member(g, req)
        if not self._accepts_joining(g, member):
            self._turn_away(g, req.member_id, member, now)
            return fail(E.GROUP_MAX_SIZE_REACHED, "")
        if not self._supports_protocols(g, req.protocol_type, req.protocols):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        if unknown:
            self._join_new_member(g, token, req, now)
        else:
            self._join_known_member(g, token, req, now)
        if g.state is PREPARING:
            self._maybe_complete_join(g, now)

    def _joining_member(self, g: Group, req: JoinRequest) -> Member | None:
        """The member that already holds a place for this JoinGroup. A static member restarting
        without its member id would replace its own place, so it is not counted as a newcomer
        (Kafka's classic coordinator counts it; KAFKA-20601 stopped that for the new protocol)."""
        if req.member_id:
            return g.members.get(req.member_id)
        if req.group_instance_id is not None:
            return g.members.get(g.static_members.get(req.group_instance_id, ""))
        return None

    def _accepts_joining(self, g: Group, member: Member | None) -> bool:
        """Kafka's group.max.size rule. While rebalancing, the members that have already rejoined
        are counted, not the group's size: the size may exceed a lowered limit, and counting the
        rejoined ones turns away the last members to come back, which shrinks the group to the limit."""
        limit = self.settings.max_group_size
        if g.state in (EMPTY, DEAD):
            return True
        if g.state is PREPARING:
            if member is not None and member.join_token is not None:
                return True
            return sum(1 for m in g.members.values() if m.join_token is not None) < limit
        return member is not None or len(g.members) < limit

    def _turn_away(self, g: Group, member_id: str, member: Member | None, now: int) -> None:
        """A member refused for the size limit gives up whatever place it had, so that it does not
        hold a slot (or the join phase) for a member that will not come back."""
        if member_id in g.pending_members:
            g.pending_members.discard(member_id)
            self._cancel(("pending", g.group_id, member_id))
            self._maybe_complete_join(g, now)
        if member is not None:
            self._remove_member(g, member)
            self._after_member_removed(g, now)

    def _supports_protocols(self, g: Group, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not g.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != g.protocol_type:
            return False
        names = {n for n, _ in protocols}
        return any(all(any(n == pn for pn, _ in m.protocols) for m in g.members.values()) for n in names)

    def _join_new_member(self, g: Group, token: int, req: JoinRequest, now: int) -> None:
        new_id = self._new_member_id(req.group_instance_id or req.client_id)
        if req.group_instance_id is not None:
            old_id = g.static_members.get(req.group_instance_id)
            if old_id is None:
                self._add_member_and_rebalance(g, token, new_id, req, now)
            else:
                self._replace_static_member(g, token, old_id, new_id, req, now)
            return
        if req.require_known_member_id:
            g.pending_members.add(new_id)
            self._schedule(("pending", g.group_id, new_id), now + req.session_timeout_ms)
            self._reply(token, JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_id))
            return
        self._add_member_and_rebalance(g, token, new_id, req, now)

    def _join_known_member(self, g: Group, token: int, req: JoinRequest, now: int) -> None:
        mid = req.member_id
        if mid in g.pending_members:
            self._add_member_and_rebalance(g, token, mid, req, now)
            return
        if self._fenced(g, req.group_instance_id, mid):
            self._reply(token, JoinResult(E.FENCED_INSTANCE_ID, member_id=mid))
            return
        m = g.members.get(mid)
        if m is None or (req.group_instance_id is not None and req.group_instance_id not in g.static_members):
            self._reply(token, JoinResult(E.UNKNOWN_MEMBER_ID, member_id=mid))
            return
        if g.state is PREPARING:
            self._update_member_and_rebalance(g, m, token, req, now)
        elif g.state is COMPLETING:
            if m.matches(req.protocols):
                # the member lost our first answer: give it the same one again
                self._reply(token, self._join_result(g, m))
            else:
                self._update_member_and_rebalance(g, m, token, req, now)
        elif g.state is STABLE:
            if g.leader == mid or not m.matches(req.protocols):
                # a leader rejoins to force a new assignment; changed metadata (new subscription,
                # or the owned partitions of the cooperative protocol) needs one too
                self._update_member_and_rebalance(g, m, token, req, now)
            else:
                self._reply(token, self._join_result(g, m, with_members=False))
        else:
            self._reply(token, JoinResult(E.UNKNOWN_MEMBER_ID, member_id=mid))

    def _add_member_and_rebalance(self, g: Group, token: int, member_id: str, req: JoinRequest, now: int) -> None:
        m = Member(member_id, req.group_instance_id, req.client_id, req.client_host, req.rebalance_timeout_ms,
                   req.session_timeout_ms, req.protocol_type, list(req.protocols), join_token=token, is_new=True)
        if g.state is PREPARING and g.generation == 0:
            g.new_member_added = True
        if not g.members:
            g.protocol_type = req.protocol_type
        g.members[member_id] = m
        g.pending_members.discard(member_id)
        self._cancel(("pending", g.group_id, member_id))
        if m.group_instance_id is not None:
            g.static_members[m.group_instance_id] = member_id
        if g.leader is None:
            g.leader = member_id
        self._heartbeat(g, m, now, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(g, now)

    def _update_member_and_rebalance(self, g: Group, m: Member, token: int, req: JoinRequest, now: int) -> None:
        self._update_member(m, token, req)
        self._maybe_prepare_rebalance(g, now)

    def _update_member(self, m: Member, token: int, req: JoinRequest) -> None:
        m.protocols = list(req.protocols)
        m.rebalance_timeout_ms = req.rebalance_timeout_ms
        m.session_timeout_ms = req.session_timeout_ms
        if m.join_token is not None and m.join_token != token:
            # a retried JoinGroup supersedes the first; answer the first so its connection moves on
            self._reply(m.join_token, JoinResult(E.REBALANCE_IN_PROGRESS, member_id=m.member_id))
        m.join_token = token

    def _replace_static_member(self, g: Group, token: int, old_id: str, new_id: str, req: JoinRequest,
                               now: int) -> None:
        """A static member came back with a new member id: it takes its old place, and whatever
        the old incarnation still waits for is fenced."""
        m = g.members.pop(old_id)
        if m.join_token is not None:
            self._reply(m.join_token, JoinResult(E.FENCED_INSTANCE_ID, member_id=old_id))
            m.join_token = None
        if m.sync_token is not None:
            self._reply(m.sync_token, SyncResult(E.FENCED_INSTANCE_ID))
            m.sync_token = None
        self._cancel(("member", g.group_id, old_id))
        m.member_id = new_id
        g.members[new_id] = m
        if g.leader == old_id:
            g.leader = new_id
        if old_id in g.pending_sync:
            g.pending_sync.discard(old_id)
            g.pending_sync.add(new_id)
        assert req.group_instance_id is not None
        g.static_members[req.group_instance_id] = new_id
        self._heartbeat(g, m, now)
        self._update_member(m, token, req)
        if g.state is STABLE:
            if g.protocol_name == self._select_protocol(g):
                self._write_group(g)
                m.join_token = None
                self._reply(token, JoinResult(
                    0, member_id=new_id, generation_id=g.generation, protocol_type=g.protocol_type,
                    protocol_name=g.protocol_name, leader=g.leader or "",
                    members=self._joined_members(g) if g.leader == new_id else (),
                    skip_assignment=g.leader == new_id))
            else:
                self._maybe_prepare_rebalance(g, now)
        elif g.state is COMPLETING:
            self._prepare_rebalance(g, now)
        # PreparingRebalance: it simply takes part in the join phase under its new id

    def _maybe_prepare_rebalance(self, g: Group, now: int) -> None:
        if g.state in (EMPTY, STABLE, COMPLETING):
            self._prepare_rebalance(g, now)

    def _prepare_rebalance(self, g: Group, now: int) -> None:
        if g.state is COMPLETING:
            self._reset_and_propagate(g, E.REBALANCE_IN_PROGRESS, now)
        self._cancel(("sync", g.group_id))
        g.pending_sync.clear()
        timeout = g.rebalance_timeout()
        if g.state is EMPTY:
            initial = self.settings.initial_rebalance_delay_ms
            delay = min(initial, timeout)
            g.in_initial_delay = True
            g.initial_delay_remaining = max(timeout - initial, 0)
            g.new_member_added = False
        else:
            delay = timeout
            g.in_initial_delay = False
        self._transition(g, PREPARING, now)
        self._schedule(("join", g.group_id), now + delay)
        self._maybe_complete_join(g, now)

    def _maybe_complete_join(self, g: Group, now: int) -> None:
        if g.state is PREPARING and not g.in_initial_delay and g.all_joined():
            self._complete_join(g, now)

    def _on_join_deadline(self, g: Group, now: int) -> None:
        if g.state is not PREPARING:
            return
        if g.in_initial_delay:
            if g.new_member_added and g.initial_delay_remaining > 0:
                initial = self.settings.initial_rebalance_delay_ms
                g.new_member_added = False
                delay = min(initial, g.initial_delay_remaining)
                g.initial_delay_remaining = max(g.initial_delay_remaining - initial, 0)
                self._schedule(("join", g.group_id), now + delay)
                return
            g.in_initial_delay = False
        self._complete_join(g, now)

    def _complete_join(self, g: Group, now: int) -> None:
        self._cancel(("join", g.group_id))
        # dynamic members that did not rejoin in time are gone; static ones keep their place
        for m in [m for m in g.members.values() if m.join_token is None and m.group_instance_id is None]:
            self._remove_member(g, m)
        if g.members and not self._elect_joined_leader(g):
            # only absent static members: wait for them another rebalance timeout
            self._schedule(("join", g.group_id), now + g.rebalance_timeout())
            return
        g.generation += 1
        if not g.members:
            g.protocol_name = None
            self._snapshot_subscriptions(g)
            self._transition(g, EMPTY, now)
            self._write_group(g)
            return
        g.protocol_name = self._select_protocol(g)
        self._snapshot_subscriptions(g)
        self._transition(g, COMPLETING, now)
        for m in g.members.values():
            if m.join_token is not None:
                self._reply(m.join_token, self._join_result(g, m))
                m.join_token = None
            m.is_new = False
            self._heartbeat(g, m, now)
            g.pending_sync.add(m.member_id)
        self._schedule(("sync", g.group_id), now + g.rebalance_timeout())

    def _elect_joined_leader(self, g: Group) -> bool:
        leader = g.members.get(g.leader or "")
        if leader is not None and leader.join_token is not None:
            return True
        for m in g.members.values():
            if m.join_token is not None:
                g.leader = m.member_id
                return True
        return False

    def _select_protocol(self, g: Group) -> str | None:
        """Each member votes for its most preferred protocol among those all members support."""
        members = list(g.members.values())
        if not members:
            return None
        candidates = [n for n, _ in members[0].protocols
                      if all(any(n == pn for pn, _ in m.protocols) for m in members)]
        if not candidates:
            return None
        votes = dict.fromkeys(candidates, 0)
        for m in members:
            for n, _ in m.protocols:
                if n in votes:
                    votes[n] += 1
                    break
        return max(candidates, key=lambda n: votes[n])

    def _joined_members(self, g: Group) -> tuple[JoinedMember, ...]:
        return tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(g.protocol_name))
                     for m in g.members.values())

    def _join_result(self, g: Group, m: Member, with_members: bool = True) -> JoinResult:
        leader = g.leader == m.member_id
        return JoinResult(0, member_id=m.member_id, generation_id=g.generation, protocol_type=g.protocol_type,
                          protocol_name=g.protocol_name, leader=g.leader or "",
                          members=self._joined_members(g) if leader and with_members else ())

    # ==========================================================================================
    # SyncGroup
    # ==========================================================================================
    def sync_group(self, token: int, req: SyncRequest, now: int) -> None:
        def fail(error: int) -> None:
            self._reply(token, SyncResult(error))

        if not req.group_id:
            return fail(E.INVALID_GROUP_ID)
        err = self.coordinator_error(req.group_id)
        if err:
            return fail(err)
        g = self.groups.get(req.group_id)
        if g is None:
            return fail(E.UNKNOWN_MEMBER_ID)
        if g.state is DEAD:
            return fail(E.COORDINATOR_NOT_AVAILABLE)
        if self._fenced(g, req.group_instance_id, req.member_id):
            return fail(E.FENCED_INSTANCE_ID)
        m = g.members.get(req.member_id)
        if m is None:
            return fail(E.UNKNOWN_MEMBER_ID)
        if req.generation_id != g.generation:
            return fail(E.ILLEGAL_GENERATION)
        if (req.protocol_type is not None and req.protocol_type != g.protocol_type) or (
                req.protocol_name is not None and req.protocol_name != g.protocol_name):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        if g.state is EMPTY:
            return fail(E.UNKNOWN_MEMBER_ID)
        if g.state is PREPARING:
            return fail(E.REBALANCE_IN_PROGRESS)
        g.pending_sync.discard(m.member_id)
        if g.state is STABLE:
            self._reply(token, SyncResult(0, g.protocol_type, g.protocol_name, m.assignment))
            self._heartbeat(g, m, now)
            return
        # CompletingRebalance: wait for the leader's assignment
        if m.sync_token is not None and m.sync_token != token:
            self._reply(m.sync_token, SyncResult(E.REBALANCE_IN_PROGRESS))
        m.sync_token = token
        if g.leader == m.member_id:
            for member in g.members.values():
                member.assignment = req.assignments.get(member.member_id, b"")
            self._write_group(g)
            self._transition(g, STABLE, now)
            for member in g.members.values():
                if member.sync_token is not None:
                    self._reply(member.sync_token,
                                SyncResult(0, g.protocol_type, g.protocol_name, member.assignment))
                    member.sync_token = None
                self._heartbeat(g, member, now)

    def _reset_and_propagate(self, g: Group, error: int, now: int) -> None:
        for m in g.members.values():
            m.assignment = b""
            if m.sync_token is not None:
                self._reply(m.sync_token, SyncResult(error))
                m.sync_token = None
                self._heartbeat(g, m, now)  # no longer parked: its session counts again

    def _on_sync_deadline(self, g: Group, now: int) -> None:
        if g.state not in (COMPLETING, STABLE) or not g.pending_sync:
            return
        for mid in list(g.pending_sync):
            m = g.members.get(mid)
            if m is not None:
                self._remove_member(g, m)
        g.pending_sync.clear()
        self._maybe_prepare_rebalance(g, now)

    # ==========================================================================================
    # Heartbeat, LeaveGroup, membership timeouts
    # ==========================================================================================
    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int,
                  now: int) -> int:
        if not group_id:
            return E.INVALID_GROUP_ID
        err = self.coordinator_error(group_id)
        if err:
            return err
        g = self.groups.get(group_id)
        if g is None:
            return E.UNKNOWN_MEMBER_ID
        if g.state is DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if self._fenced(g, group_instance_id, member_id):
            return E.FENCED_INSTANCE_ID
        m = g.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if generation != g.generation:
            return E.ILLEGAL_GENERATION
        if g.state is EMPTY:
            return E.UNKNOWN_MEMBER_ID
        self._heartbeat(g, m, now)
        return E.REBALANCE_IN_PROGRESS if g.state is PREPARING else 0

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]], now: int) -> tuple[int, list[int]]:
        """(top-level error, one error per (member id, instance id) in `leaving`). An empty member
        id with an instance id removes that static member (the admin path)."""
        if not group_id:
            return E.INVALID_GROUP_ID, []
        err = self.coordinator_error(group_id)
        if err:
            return err, []
        g = self.groups.get(group_id)
        if g is None:
            return 0, [E.UNKNOWN_MEMBER_ID] * len(leaving)
        if g.state is DEAD:
            return E.COORDINATOR_NOT_AVAILABLE, []
        errors: list[int] = []
        for mid, iid in leaving:
            if mid == "":
                cur = g.static_members.get(iid) if iid is not None else None
                if cur is None:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                    continue
                mid = cur
            elif mid in g.pending_members:
                g.pending_members.discard(mid)
                self._cancel(("pending", g.group_id, mid))
                self._maybe_complete_join(g, now)
                errors.append(0)
                continue
            elif self._fenced(g, iid, mid):
                errors.append(E.FENCED_INSTANCE_ID)
                continue
            m = g.members.get(mid)
            if m is None:
                errors.append(E.UNKNOWN_MEMBER_ID)
                continue
            self._remove_member(g, m)
            self._after_member_removed(g, now)
            errors.append(0)
        return 0, errors

    def _on_session_deadline(self, g: Group, member_id: str, now: int) -> None:
        m = g.members.get(member_id)
        if m is None:
            return
        if now < m.session_deadline:
            self._schedule(("member", g.group_id, member_id), m.session_deadline)
            return
        if not m.is_new and (m.join_token is not None or m.sync_token is not None):
            return  # parked in a rebalance; the rebalance timeout governs it, not the session
        self._remove_member(g, m)
        self._after_member_removed(g, now)

    def _on_pending_deadline(self, g: Group, member_id: str, now: int) -> None:
        if member_id in g.pending_members:
            g.pending_members.discard(member_id)
            self._maybe_complete_join(g, now)

    def _remove_member(self, g: Group, m: Member) -> None:
        if m.join_token is not None:
            self._reply(m.join_token, JoinResult(E.UNKNOWN_MEMBER_ID, member_id=m.member_id))
            m.join_token = None
        if m.sync_token is not None:
            self._reply(m.sync_token, SyncResult(E.UNKNOWN_MEMBER_ID))
            m.sync_token = None
        del g.members[m.member_id]
        if m.group_instance_id is not None and g.static_members.get(m.group_instance_id) == m.member_id:
            del g.static_members[m.group_instance_id]
        g.pending_sync.discard(m.member_id)
        self._cancel(("member", g.group_id, m.member_id))
        if g.leader == m.member_id:
            g.leader = next(iter(g.members), None)

    def _after_member_removed(self, g: Group, now: int) -> None:
        if g.state in (STABLE, COMPLETING):
            self._prepare_rebalance(g, now)
        elif g.state is PREPARING:
            self._maybe_complete_join(g, now)

    def _heartbeat(self, g: Group, m: Member, now: int, timeout: int | None = None) -> None:
        m.session_deadline = now + (m.session_timeout_ms if timeout is None else timeout)
        self._schedule(("member", g.group_id, m.member_id), m.session_deadline, earlier_only=True)

    def _fenced(self, g: Group, group_instance_id: str | None, member_id: str) -> bool:
        if group_instance_id is None:
            return False
        cur = g.static_members.get(group_instance_id)
        return cur is not None and cur != member_id

    # ==========================================================================================
    # offsets
    # ==========================================================================================
    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int,
                       offsets: dict[TopicPartition, OffsetCommitIn], now: int,
                       retention_ms: int = -1) -> CommitPlan:
        """Check an OffsetCommit; apply the returned plan with offsets_written after its records
        are in the log (partitions with an error are in plan.errors and never stored)."""
        plan = CommitPlan(group_id, self.partition_for(group_id), {}, {}, [])
        err = self._commit_group_error(group_id, member_id, group_instance_id, generation, now)
        if err:
            plan.errors = dict.fromkeys(offsets, err)
            return plan
        self._stage(plan, offsets, now, retention_ms)
        return plan

    def _commit_group_error(self, group_id: str, member_id: str, group_instance_id: str | None,
                            generation: int, now: int) -> int:
        err = self.coordinator_error(group_id)
        if err:
            return err
        g = self.groups.get(group_id)
        if g is None:
            # generation -1: a consumer that only stores offsets here (manual assignment); the group
            # is made for it when its offsets are written. Otherwise a stale member of a lost group.
            return E.ILLEGAL_GENERATION if generation >= 0 else 0
        if g.state is DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if self._fenced(g, group_instance_id, member_id):
            return E.FENCED_INSTANCE_ID
        if generation < 0 and g.state is EMPTY:
            return 0
        if g.state is COMPLETING:
            return E.REBALANCE_IN_PROGRESS
        m = g.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if generation != g.generation:
            return E.ILLEGAL_GENERATION
        self._heartbeat(g, m, now)
        return 0

    def _stage(self, plan: CommitPlan, offsets: dict[TopicPartition, OffsetCommitIn], now: int,
               retention_ms: int) -> None:
        for tp, o in offsets.items():
            if not self._partition_exists(*tp):
                plan.errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
                continue
            metadata = o.metadata or ""
            if len(metadata) > self.settings.offset_metadata_max_bytes:
                plan.errors[tp] = E.OFFSET_METADATA_TOO_LARGE
                continue
            commit_ts = now if o.commit_timestamp < 0 else o.commit_timestamp
            expire_ts = commit_ts + retention_ms if retention_ms >= 0 else -1
            entry = OffsetEntry(o.offset, o.leader_epoch, metadata, commit_ts, expire_ts)
            plan.errors[tp] = 0
            plan.staged[tp] = entry
            plan.writes.append(Write(plan.partition,
                                     rec.encode_key(rec.OffsetKey(plan.group_id, tp[0], tp[1])),
                                     rec.encode_offset_value(rec.OffsetValue(
                                         entry.offset, entry.leader_epoch, entry.metadata, entry.commit_timestamp,
                                         entry.expire_timestamp))))

    def offsets_written(self, plan: CommitPlan, first_log_position: int) -> None:
        """The plan's records are in the log from `first_log_position` on (one per staged offset,
        in order): make the offsets visible (or, for a transaction, pending on its marker)."""
        g = self.groups.get(plan.group_id)
        if g is None:
            now = max((e.commit_timestamp for e in plan.staged.values()), default=-1)
            g = self.groups[plan.group_id] = Group(plan.group_id, plan.partition, state_timestamp=now)
        for i, (tp, entry) in enumerate(plan.staged.items()):
            entry.log_position = first_log_position + i
            if plan.producer_id >= 0:
                g.txn_pending.setdefault(plan.producer_id, {})[tp] = entry
                self._txn_groups.setdefault(plan.producer_id, set()).add(g.group_id)
            else:
                g.offsets[tp] = entry

    def prepare_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                            offsets: dict[TopicPartition, OffsetCommitIn], now: int, *, member_id: str = "",
                            group_instance_id: str | None = None, generation: int = -1) -> CommitPlan:
        """TxnOffsetCommit: like a commit, but the offsets stay invisible (and make OffsetFetch
        with require_stable answer UNSTABLE_OFFSET_COMMIT) until complete_txn. The member checks
        are the loose ones Kafka applies to transactional commits (KIP-447)."""
        plan = CommitPlan(group_id, self.partition_for(group_id), {}, {}, [], producer_id, producer_epoch)
        err = self.coordinator_error(group_id)
        g = self.groups.get(group_id)
        if not err and g is not None:
            if g.state is DEAD:
                err = E.COORDINATOR_NOT_AVAILABLE
            elif self._fenced(g, group_instance_id, member_id):
                err = E.FENCED_INSTANCE_ID
            elif member_id and member_id not in g.members:
                err = E.UNKNOWN_MEMBER_ID
            elif generation >= 0 and generation != g.generation:
                err = E.ILLEGAL_GENERATION
        if err:
            plan.errors = dict.fromkeys(offsets, err)
            return plan
        self._stage(plan, offsets, now, -1)
        return plan

    def complete_txn(self, producer_id: int, commit: bool) -> None:
        """The transaction's marker is in `__consumer_offsets`: its offsets become the committed
        ones (unless a later plain commit already overtook them) or are dropped."""
        for gid in self._txn_groups.pop(producer_id, set()):
            g = self.groups.get(gid)
            if g is None:
                continue
            pending = g.txn_pending.pop(producer_id, {})
            if not commit:
                continue
            for tp, e in pending.items():
                cur = g.offsets.get(tp)
                if cur is None or cur.log_position < e.log_position:
                    g.offsets[tp] = e

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      require_stable: bool) -> tuple[int, list[FetchedOffset]]:
        """(group error, offsets). partitions None = every partition the group has an offset for."""
        err = self.coordinator_error(group_id)
        if err:
            return err, []
        g = self.groups.get(group_id)
        if g is None or g.state is DEAD:
            return 0, [FetchedOffset(t, p, NO_OFFSET, -1, "", 0) for t, p in partitions or []]
        if partitions is None:
            partitions = sorted(g.offsets)
        out = []
        for tp in partitions:
            if require_stable and g.has_pending_txn(tp):
                out.append(FetchedOffset(tp[0], tp[1], NO_OFFSET, -1, "", E.UNSTABLE_OFFSET_COMMIT))
                continue
            e = g.offsets.get(tp)
            if e is None:
                out.append(FetchedOffset(tp[0], tp[1], NO_OFFSET, -1, "", 0))
            else:
                out.append(FetchedOffset(tp[0], tp[1], e.offset, e.leader_epoch, e.metadata, 0))
        return 0, out

    def expire_offsets(self, now: int) -> int:
        """Tombstone offsets past retention; an Empty group left without offsets is deleted.
        Empty groups count from the moment they became Empty, groups that only store offsets
        from each commit; groups with members keep theirs. Returns the number of offsets expired."""
        retention = self.settings.offsets_retention_ms
        expired_total = 0
        for g in list(self.groups.values()):
            if g.partition not in self.owned or g.state is not EMPTY:
                continue
            expired = []
            for tp, e in g.offsets.items():
                if g.has_pending_txn(tp):
                    continue
                if e.expire_timestamp >= 0:
                    due = now >= e.expire_timestamp
                else:
                    base = g.state_timestamp if g.protocol_type else e.commit_timestamp
                    due = now - base >= retention
                if due:
                    expired.append(tp)
            for tp in expired:
                del g.offsets[tp]
                self._fx.writes.append(Write(g.partition, rec.encode_key(rec.OffsetKey(g.group_id, *tp)), None))
            expired_total += len(expired)
            if not g.offsets and not g.txn_pending and not g.members and not g.pending_members:
                self._delete_group(g, now)
        return expired_total

    # ==========================================================================================
    # DescribeGroups, ListGroups, DeleteGroups
    # ==========================================================================================
    def describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        dead = GroupSummary(group_id, DEAD.value, "", "", ())
        err = self.coordinator_error(group_id)
        if err:
            return err, dead
        g = self.groups.get(group_id)
        if g is None:
            return 0, dead
        stable = g.state is STABLE
        members = tuple(
            MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                          m.metadata(g.protocol_name) if stable else b"", m.assignment if stable else b"")
            for m in g.members.values())
        return 0, GroupSummary(g.group_id, g.state.value, g.protocol_type or "",
                               (g.protocol_name or "") if stable else "", members)

    def list_groups(self, states: list[str] | None = None,
                    types: list[str] | None = None) -> tuple[int, list[tuple[str, str, str]]]:
        """(error, [(group id, protocol type, state)]). Every group here is a classic group."""
        err = 0 if self.active else E.COORDINATOR_NOT_AVAILABLE
        if self.loading:
            err = E.COORDINATOR_LOAD_IN_PROGRESS
        want_states = {s.lower() for s in states or []}
        if types and "classic" not in {t.lower() for t in types}:
            return err, []
        out = []
        for g in self.groups.values():
            if g.state is DEAD or g.partition not in self.owned:
                continue
            if want_states and g.state.value.lower() not in want_states:
                continue
            out.append((g.group_id, g.protocol_type or "", g.state.value))
        return err, out

    def delete_groups(self, group_ids: list[str], now: int) -> dict[str, int]:
        out: dict[str, int] = {}
        for gid in group_ids:
            if gid in out:
                continue
            err = self.coordinator_error(gid)
            if err:
                out[gid] = err
                continue
            g = self.groups.get(gid)
            if g is None or g.state is DEAD:
                out[gid] = E.GROUP_ID_NOT_FOUND
            elif g.state is not EMPTY:
                out[gid] = E.NON_EMPTY_GROUP
            else:
                for tp in list(g.offsets):
                    self._fx.writes.append(Write(g.partition, rec.encode_key(rec.OffsetKey(gid, *tp)), None))
                g.offsets.clear()
                self._delete_group(g, now)
                out[gid] = 0
        return out

    def _delete_group(self, g: Group, now: int) -> None:
        self._transition(g, DEAD, now)
        for pid in g.txn_pending:
            groups = self._txn_groups.get(pid)
            if groups is not None:
                groups.discard(g.group_id)
        g.txn_pending.clear()
        self._fx.writes.append(Write(g.partition, rec.encode_key(rec.GroupKey(g.group_id)), None))
        del self.groups[g.group_id]
        self._cancel(("join", g.group_id))
        self._cancel(("sync", g.group_id))

    # ==========================================================================================
    # OffsetDelete
    # ==========================================================================================
    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> tuple[int, dict[TopicPartition, int]]:
        """(group error, error per partition). Kafka's rules (KIP-496): a group with members that is
        not of the consumer protocol refuses as a whole (NON_EMPTY_GROUP); a consumer group with
        members keeps the offsets of topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC); every
        other offset is tombstoned, committed or still pending in a transaction, so that it stays
        gone after a restart. A group left Empty without offsets goes at the next retention check,
        as in Kafka 4 (whose coordinator deletes such groups in the same periodic cleanup)."""
        if not group_id:
            return E.INVALID_GROUP_ID, {}
        err = self.coordinator_error(group_id)
        if err:
            return err, {}
        g = self.groups.get(group_id)
        if g is None or g.state is DEAD:
            return E.GROUP_ID_NOT_FOUND, {}
        if g.state is not EMPTY and g.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return E.NON_EMPTY_GROUP, {}
        out: dict[TopicPartition, int] = {}
        for tp in partitions:
            if not self._partition_exists(*tp):
                out[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif g.state is not EMPTY and self._subscribed(g, tp[0]):
                out[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                out[tp] = 0
                had = g.offsets.pop(tp, None) is not None
                for pending in g.txn_pending.values():
                    had = pending.pop(tp, None) is not None or had
                if had:
                    self._fx.writes.append(Write(g.partition, rec.encode_key(rec.OffsetKey(group_id, *tp)), None))
        return 0, out

    def _subscribed(self, g: Group, topic: str) -> bool:
        """Kafka's ClassicGroup.isSubscribedToTopic: unknown subscriptions count as "all topics"
        for the consumer protocol (it cannot rule any out) and as "none" for any other."""
        if g.subscribed_topics is None:
            return g.protocol_type == CONSUMER_PROTOCOL_TYPE
        return topic in g.subscribed_topics

    def _snapshot_subscriptions(self, g: Group) -> None:
        """Taken when a generation starts (and at load), as Kafka does: during a rebalance the
        subscriptions of the generation still assigned are the ones that count."""
        g.subscribed_topics = subscribed_topics(g.group_id, g.protocol_type, g.protocol_name,
                                                (m.metadata(g.protocol_name) for m in g.members.values()))

    # ==========================================================================================
    # helpers
    # ==========================================================================================
    def _transition(self, g: Group, state: GroupState, now: int) -> None:
        g.state = state
        g.state_timestamp = now

    def _reply(self, token: int, result: JoinResult | SyncResult) -> None:
        self._fx.replies.append((token, result))

    def _write_group(self, g: Group) -> None:
        members = () if g.state is EMPTY and not g.members else tuple(
            rec.MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                            m.session_timeout_ms, m.metadata(g.protocol_name), m.assignment)
            for m in g.members.values())
        value = rec.GroupValue(g.protocol_type or "", g.generation, g.protocol_name, g.leader, g.state_timestamp,
                               members)
        self._fx.writes.append(Write(g.partition, rec.encode_key(rec.GroupKey(g.group_id)),
                                     rec.encode_group_value(value)))
