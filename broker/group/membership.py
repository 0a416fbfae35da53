"""Group membership, Kafka's classic protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
rebalances and their deadlines, static members (docs/groups.md walks through the rules)."""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter
from collections.abc import Callable

from . import records as rec
from .core import COMPLETING, DEAD, EMPTY, PREPARING, STABLE, E, GroupTable, TimerKey
from .model import Group, JoinedMember, JoinRequest, JoinResult, Member, Now, SyncRequest, SyncResult

# A member's first JoinGroup may wait a whole rebalance; it cannot heartbeat meanwhile, so it gets
# this long (Kafka's fixed value) instead of its session timeout before it is given up on.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class Membership:
    """Joining, syncing, heartbeats, leaving, and the rebalance timers; for the other parts, the
    member checks of an offset commit (offsets.MemberChecks) and the sessions of groups that come
    and go with their partition (loading.Sessions)."""

    def __init__(self, table: GroupTable, new_member_id: Callable[[str], str] | None = None) -> None:
        self.t = table
        self._new_member_id = new_member_id or (lambda prefix: f"{prefix}-{uuid.uuid4()}")

    def join_group(self, token: int, req: JoinRequest, now: Now) -> None:
        """The result arrives as a reply to `token` (at once, or when the join phase ends)."""
        def fail(error: int, member_id: str = req.member_id) -> None:
            self.t.reply(token, JoinResult(error, member_id=member_id))

        err = self.t.coordinator_error(req.group_id) if req.group_id else E.INVALID_GROUP_ID
        if err:
            return fail(err)
        s = self.t.settings
        if not s.min_session_timeout_ms <= req.session_timeout_ms <= s.max_session_timeout_ms:
            return fail(E.INVALID_SESSION_TIMEOUT)
        unknown = req.member_id == ""
        g = self.t.groups.get(req.group_id)
        if g is None:
            if not unknown:
                return fail(E.UNKNOWN_MEMBER_ID)
            g = self.t.groups[req.group_id] = Group(req.group_id, self.t.partition_for(req.group_id), state_timestamp=now.wall)
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
        limit = self.t.settings.max_group_size
        if g.state in (EMPTY, DEAD):
            return True
        if g.state is PREPARING:
            if member is not None and member.join_token is not None:
                return True
            return sum(1 for m in g.members.values() if m.join_token is not None) < limit
        return member is not None or len(g.members) < limit

    def _turn_away(self, g: Group, member_id: str, member: Member | None, now: Now) -> None:
        """A member refused for the size limit gives up whatever place it had, so that it does not
        hold a slot (or the join phase) for a member that will not come back."""
        if member_id in g.pending_members:
            self._drop_pending(g, member_id, now)
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

    def _join_new_member(self, g: Group, token: int, req: JoinRequest, now: Now) -> None:
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
            self.t.timers.schedule(("pending", g.group_id, new_id), now.mono + req.session_timeout_ms)
            self.t.reply(token, JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_id))
            return
        self._add_member_and_rebalance(g, token, new_id, req, now)

    def _join_known_member(self, g: Group, token: int, req: JoinRequest, now: Now) -> None:
        mid = req.member_id
        if mid in g.pending_members:
            self._add_member_and_rebalance(g, token, mid, req, now)
            return
        if g.fenced(req.group_instance_id, mid):
            self.t.reply(token, JoinResult(E.FENCED_INSTANCE_ID, member_id=mid))
            return
        m = g.members.get(mid)
        if m is None or (req.group_instance_id is not None and req.group_instance_id not in g.static_members):
            self.t.reply(token, JoinResult(E.UNKNOWN_MEMBER_ID, member_id=mid))
            return
        if g.state is PREPARING:
            self._update_member_and_rebalance(g, m, token, req, now)
        elif g.state is COMPLETING:
            if m.matches(req.protocols):
                # the member lost our first answer: give it the same one again
                self.t.reply(token, self._join_result(g, m))
            else:
                self._update_member_and_rebalance(g, m, token, req, now)
        elif g.state is STABLE:
            if g.leader == mid or not m.matches(req.protocols):
                # a leader rejoins to force a new assignment; changed metadata (new subscription,
                # or the owned partitions of the cooperative protocol) needs one too
                self._update_member_and_rebalance(g, m, token, req, now)
            else:
                self.t.reply(token, self._join_result(g, m, with_members=False))
        else:
            self.t.reply(token, JoinResult(E.UNKNOWN_MEMBER_ID, member_id=mid))

    def _add_member_and_rebalance(self, g: Group, token: int, member_id: str, req: JoinRequest, now: Now) -> None:
        m = Member(member_id, req.group_instance_id, req.client_id, req.client_host, req.rebalance_timeout_ms,
                   req.session_timeout_ms, req.protocol_type, list(req.protocols), join_token=token, is_new=True)
        if g.state is PREPARING and g.generation == 0:
            g.new_member_added = True
        if not g.members:
            g.protocol_type = req.protocol_type
        g.members[member_id] = m
        g.pending_members.discard(member_id)
        self.t.timers.cancel(("pending", g.group_id, member_id))
        if m.group_instance_id is not None:
            g.static_members[m.group_instance_id] = member_id
        if g.leader is None:
            g.leader = member_id
        self._heartbeat(g, m, now, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(g, now)

    def _update_member_and_rebalance(self, g: Group, m: Member, token: int, req: JoinRequest, now: Now) -> None:
        self._update_member(m, token, req)
        self._maybe_prepare_rebalance(g, now)

    def _update_member(self, m: Member, token: int, req: JoinRequest) -> None:
        m.protocols = list(req.protocols)
        m.rebalance_timeout_ms = req.rebalance_timeout_ms
        m.session_timeout_ms = req.session_timeout_ms
        if m.join_token is not None and m.join_token != token:
            # a retried JoinGroup supersedes the first; answer the first so its connection moves on
            self.t.reply(m.join_token, JoinResult(E.REBALANCE_IN_PROGRESS, member_id=m.member_id))
        m.join_token = token

    def _replace_static_member(self, g: Group, token: int, old_id: str, new_id: str, req: JoinRequest,
                               now: Now) -> None:
        """A static member came back with a new member id: it takes its old place, and whatever
        the old incarnation still waits for is fenced."""
        m = g.members.pop(old_id)
        self._answer_parked(m, E.FENCED_INSTANCE_ID)
        self.t.timers.cancel(("member", g.group_id, old_id))
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
                self.t.reply(token, dataclasses.replace(self._join_result(g, m), skip_assignment=g.leader == new_id))
            else:
                self._maybe_prepare_rebalance(g, now)
        elif g.state is COMPLETING:
            self._prepare_rebalance(g, now)
        # PreparingRebalance: it simply takes part in the join phase under its new id

    def _maybe_prepare_rebalance(self, g: Group, now: Now) -> None:
        if g.state in (EMPTY, STABLE, COMPLETING):
            self._prepare_rebalance(g, now)

    def _prepare_rebalance(self, g: Group, now: Now) -> None:
        if g.state is COMPLETING:
            self._reset_and_propagate(g, E.REBALANCE_IN_PROGRESS, now)
        self.t.timers.cancel(("sync", g.group_id))
        g.pending_sync.clear()
        timeout = g.rebalance_timeout()
        if g.state is EMPTY:
            initial = self.t.settings.initial_rebalance_delay_ms
            delay = min(initial, timeout)
            g.in_initial_delay = True
            g.initial_delay_remaining = max(timeout - initial, 0)
            g.new_member_added = False
        else:
            delay = timeout
            g.in_initial_delay = False
        g.transition(PREPARING, now)
        self.t.timers.schedule(("join", g.group_id), now.mono + delay)
        self._maybe_complete_join(g, now)

    def _maybe_complete_join(self, g: Group, now: Now) -> None:
        if g.state is PREPARING and not g.in_initial_delay and g.all_joined():
            self._complete_join(g, now)

    def _on_join_deadline(self, g: Group, now: Now) -> None:
        if g.state is not PREPARING:
            return
        if g.in_initial_delay:
            if g.new_member_added and g.initial_delay_remaining > 0:
                initial = self.t.settings.initial_rebalance_delay_ms
                g.new_member_added = False
                delay = min(initial, g.initial_delay_remaining)
                g.initial_delay_remaining = max(g.initial_delay_remaining - initial, 0)
                self.t.timers.schedule(("join", g.group_id), now.mono + delay)
                return
            g.in_initial_delay = False
        self._complete_join(g, now)

    def _complete_join(self, g: Group, now: Now) -> None:
        self.t.timers.cancel(("join", g.group_id))
        # dynamic members that did not rejoin in time are gone; static ones keep their place
        for m in [m for m in g.members.values() if m.join_token is None and m.group_instance_id is None]:
            self._remove_member(g, m)
        if g.members and not self._elect_joined_leader(g):
            # only absent static members: wait for them another rebalance timeout
            self.t.timers.schedule(("join", g.group_id), now.mono + g.rebalance_timeout())
            return
        g.generation += 1
        if not g.members:
            g.protocol_name = None
            g.snapshot_subscriptions()
            g.transition(EMPTY, now)
            self._write_group(g)
            return
        g.protocol_name = self._select_protocol(g)
        g.snapshot_subscriptions()
        g.transition(COMPLETING, now)
        for m in g.members.values():
            if m.join_token is not None:
                self.t.reply(m.join_token, self._join_result(g, m))
                m.join_token = None
            m.is_new = False
            self._heartbeat(g, m, now)
            g.pending_sync.add(m.member_id)
        self.t.timers.schedule(("sync", g.group_id), now.mono + g.rebalance_timeout())

    def _elect_joined_leader(self, g: Group) -> bool:
        """The leader stays if it rejoined, else the first member that did leads; False if none did."""
        joined = [mid for mid, m in g.members.items() if m.join_token is not None]
        if joined and g.leader not in joined:
            g.leader = joined[0]
        return bool(joined)

    def _select_protocol(self, g: Group) -> str | None:
        """Each member votes for its most preferred protocol among those all members support."""
        members = list(g.members.values())
        candidates = [n for n, _ in members[0].protocols
                      if all(any(n == pn for pn, _ in m.protocols) for m in members)] if members else []
        # every member supports every candidate: its vote is the first of them in its own order
        votes = Counter(next(n for n, _ in m.protocols if n in candidates) for m in members if candidates)
        return max(candidates, key=lambda n: votes[n], default=None)

    def _join_result(self, g: Group, m: Member, with_members: bool = True) -> JoinResult:
        """The leader is given every member's metadata to compute the assignment from."""
        members = tuple(JoinedMember(o.member_id, o.group_instance_id, o.metadata(g.protocol_name))
                        for o in g.members.values()) if g.leader == m.member_id and with_members else ()
        return JoinResult(0, member_id=m.member_id, generation_id=g.generation, protocol_type=g.protocol_type,
                          protocol_name=g.protocol_name, leader=g.leader or "", members=members)

    def sync_group(self, token: int, req: SyncRequest, now: Now) -> None:
        def fail(error: int) -> None:
            self.t.reply(token, SyncResult(error))

        found = self._member(req.group_id, req.member_id, req.group_instance_id, req.generation_id)
        if isinstance(found, int):
            return fail(found)
        g, m = found
        if (req.protocol_type is not None and req.protocol_type != g.protocol_type) or (
                req.protocol_name is not None and req.protocol_name != g.protocol_name):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        if g.state is EMPTY:
            return fail(E.UNKNOWN_MEMBER_ID)
        if g.state is PREPARING:
            return fail(E.REBALANCE_IN_PROGRESS)
        g.pending_sync.discard(m.member_id)
        if g.state is STABLE:
            self.t.reply(token, SyncResult(0, g.protocol_type, g.protocol_name, m.assignment))
            self._heartbeat(g, m, now)
            return
        # CompletingRebalance: wait for the leader's assignment
        if m.sync_token is not None and m.sync_token != token:
            self.t.reply(m.sync_token, SyncResult(E.REBALANCE_IN_PROGRESS))
        m.sync_token = token
        if g.leader == m.member_id:
            for member in g.members.values():
                member.assignment = req.assignments.get(member.member_id, b"")
            self._write_group(g)
            g.transition(STABLE, now)
            for member in g.members.values():
                if member.sync_token is not None:
                    self.t.reply(member.sync_token,
                                SyncResult(0, g.protocol_type, g.protocol_name, member.assignment))
                    member.sync_token = None
                self._heartbeat(g, member, now)

    def _reset_and_propagate(self, g: Group, error: int, now: Now) -> None:
        for m in g.members.values():
            m.assignment = b""
            if m.sync_token is not None:
                self.t.reply(m.sync_token, SyncResult(error))
                m.sync_token = None
                self._heartbeat(g, m, now)  # no longer parked: its session counts again

    def _on_sync_deadline(self, g: Group, now: Now) -> None:
        if g.state not in (COMPLETING, STABLE) or not g.pending_sync:
            return
        for mid in list(g.pending_sync):
            m = g.members.get(mid)
            if m is not None:
                self._remove_member(g, m)
        g.pending_sync.clear()
        self._maybe_prepare_rebalance(g, now)

    def _member(self, group_id: str, member_id: str, group_instance_id: str | None,
                generation: int) -> int | tuple[Group, Member]:
        """The group and the member a SyncGroup or Heartbeat comes from, or the error that says why not."""
        err = self.t.coordinator_error(group_id) if group_id else E.INVALID_GROUP_ID
        g = self.t.groups.get(group_id)
        if err or g is None or g.state is DEAD:
            return err or (E.UNKNOWN_MEMBER_ID if g is None else E.COORDINATOR_NOT_AVAILABLE)
        if g.fenced(group_instance_id, member_id):
            return E.FENCED_INSTANCE_ID
        m = g.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        return E.ILLEGAL_GENERATION if generation != g.generation else (g, m)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int,
                  now: Now) -> int:
        found = self._member(group_id, member_id, group_instance_id, generation)
        if isinstance(found, int):
            return found
        g, m = found
        if g.state is EMPTY:
            return E.UNKNOWN_MEMBER_ID
        self._heartbeat(g, m, now)
        return E.REBALANCE_IN_PROGRESS if g.state is PREPARING else 0

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]], now: Now) -> tuple[int, list[int]]:
        """(top-level error, one error per (member id, instance id) in `leaving`). An empty member
        id with an instance id removes that static member (the admin path)."""
        err = self.t.coordinator_error(group_id) if group_id else E.INVALID_GROUP_ID
        if err:
            return err, []
        g = self.t.groups.get(group_id)
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
                self._drop_pending(g, mid, now)
                errors.append(0)
                continue
            elif g.fenced(iid, mid):
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

    def _on_session_deadline(self, g: Group, member_id: str, now: Now) -> None:
        m = g.members.get(member_id)
        if m is None:
            return
        if now.mono < m.session_deadline:
            self.t.timers.schedule(("member", g.group_id, member_id), m.session_deadline)
            return
        if not m.is_new and (m.join_token is not None or m.sync_token is not None):
            return  # parked in a rebalance; the rebalance timeout governs it, not the session
        self._remove_member(g, m)
        self._after_member_removed(g, now)

    def _drop_pending(self, g: Group, member_id: str, now: Now) -> None:
        """A member told MEMBER_ID_REQUIRED that will not join after all stops holding the join phase open."""
        g.pending_members.discard(member_id)
        self.t.timers.cancel(("pending", g.group_id, member_id))
        self._maybe_complete_join(g, now)

    def _answer_parked(self, m: Member, error: int) -> None:
        """Whatever `m` waits for (a join, a sync) is answered `error`."""
        if m.join_token is not None:
            self.t.reply(m.join_token, JoinResult(error, member_id=m.member_id))
            m.join_token = None
        if m.sync_token is not None:
            self.t.reply(m.sync_token, SyncResult(error))
            m.sync_token = None

    def _remove_member(self, g: Group, m: Member) -> None:
        self._answer_parked(m, E.UNKNOWN_MEMBER_ID)
        del g.members[m.member_id]
        if m.group_instance_id is not None and g.static_members.get(m.group_instance_id) == m.member_id:
            del g.static_members[m.group_instance_id]
        g.pending_sync.discard(m.member_id)
        self.t.timers.cancel(("member", g.group_id, m.member_id))
        if g.leader == m.member_id:
            g.leader = next(iter(g.members), None)

    def _after_member_removed(self, g: Group, now: Now) -> None:
        if g.state in (STABLE, COMPLETING):
            self._prepare_rebalance(g, now)
        elif g.state is PREPARING:
            self._maybe_complete_join(g, now)

    def _heartbeat(self, g: Group, m: Member, now: Now, timeout: int | None = None) -> None:
        m.session_deadline = now.mono + (m.session_timeout_ms if timeout is None else timeout)
        self.t.timers.schedule(("member", g.group_id, m.member_id), m.session_deadline, earlier_only=True)

    def _write_group(self, g: Group) -> None:
        members = () if g.state is EMPTY and not g.members else tuple(
            rec.MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                            m.session_timeout_ms, m.metadata(g.protocol_name), m.assignment)
            for m in g.members.values())
        self.t.write(g.partition, rec.GroupKey(g.group_id), rec.encode_group_value(rec.GroupValue(
            g.protocol_type or "", g.generation, g.protocol_name, g.leader, g.state_timestamp, members)))

    def on_timer(self, key: TimerKey, now: Now) -> None:
        """A deadline of a group's member ("member", "pending") or of its rebalance ("join", "sync")."""
        g = self.t.groups.get(key[1])
        if g is None:
            return
        kind = key[0]
        if kind == "member":
            self._on_session_deadline(g, key[2], now)
        elif kind == "pending" and key[2] in g.pending_members:
            self._drop_pending(g, key[2], now)
        elif kind == "join":
            self._on_join_deadline(g, now)
        elif kind == "sync":
            self._on_sync_deadline(g, now)

    # ---- for the other parts -----------------------------------------------------------------
    def commit_error(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int,
                     now: Now, api_version: int = 9) -> int:
        """May this member commit offsets for the group (a commit counts as its heartbeat)? Every
        version is the classic protocol's."""
        err = self.t.coordinator_error(group_id)
        g = self.t.groups.get(group_id)
        if err or g is None:
            # generation -1: a consumer that only stores offsets here (manual assignment); the group
            # is made for it when its offsets are written. Otherwise a stale member of a lost group.
            return err or (E.ILLEGAL_GENERATION if generation >= 0 else 0)
        if g.state is DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if g.fenced(group_instance_id, member_id):
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

    def txn_commit_error(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int) -> int:
        """The looser checks Kafka applies to a transaction's offsets (KIP-447): an unknown group,
        an empty member id or generation -1 pass."""
        err = self.t.coordinator_error(group_id)
        g = self.t.groups.get(group_id)
        if err or g is None:
            return err
        if g.state is DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if g.fenced(group_instance_id, member_id):
            return E.FENCED_INSTANCE_ID
        if member_id and member_id not in g.members:
            return E.UNKNOWN_MEMBER_ID
        return E.ILLEGAL_GENERATION if 0 <= generation != g.generation else 0

    def fetch_error(self, g: Group, member_id: str | None, member_epoch: int) -> int:
        return 0  # a classic group's OffsetFetch names no member (Kafka ignores v9's fields for it)

    def resume(self, g: Group, now: Now) -> None:
        """A group read back with members is Stable again, and they must heartbeat within a session
        timeout, as after a coordinator move in Kafka."""
        g.state = STABLE
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        for m in g.members.values():
            self._heartbeat(g, m, now)
        if len(g.members) > self.t.settings.max_group_size:
            # the limit was lowered while the group was away: every member must rejoin, and those
            # past the limit are turned away then (as Kafka does on load)
            self._prepare_rebalance(g, now)

    def release(self, g: Group) -> None:
        """The group becomes a consumer group (an online upgrade): whatever its members wait for is
        answered REBALANCE_IN_PROGRESS, so they rejoin, and its classic deadlines go."""
        for m in g.members.values():
            self._answer_parked(m, E.REBALANCE_IN_PROGRESS)
            self.t.timers.cancel(("member", g.group_id, m.member_id))
        for mid in g.pending_members:
            self.t.timers.cancel(("pending", g.group_id, mid))
        self.t.timers.cancel(("join", g.group_id))
        self.t.timers.cancel(("sync", g.group_id))

    def downgraded(self, g: Group, now: Now) -> None:
        """A consumer group turned classic with its members (an online downgrade): recorded, their
        sessions running, and a rebalance so that they agree on a classic assignment."""
        g.protocol_name = self._select_protocol(g)
        g.snapshot_subscriptions()
        g.transition(STABLE, now)
        self._write_group(g)
        for m in g.members.values():
            self._heartbeat(g, m, now)
        self._prepare_rebalance(g, now)

    def unloaded(self, g: Group) -> None:
        """The group's partition is led elsewhere now: members parked in a join or a sync are told
        NOT_COORDINATOR so that they find the new coordinator."""
        for m in g.members.values():
            self._answer_parked(m, E.NOT_COORDINATOR)
