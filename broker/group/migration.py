"""KIP-848's online upgrade and downgrade: a group with members changes protocol (Kafka's
GroupMetadataManager, `group.consumer.migration.policy`).

* **Upgrade.** A ConsumerGroupHeartbeat joining a classic group of the "consumer" protocol with
  members turns it into a consumer group (policy `upgrade` or `bidirectional`): each classic member
  becomes a member at the classic generation, holding the partitions of its last assignment, with
  that as its target; the joiner then bumps the epoch as any new member does.
* **Classic members of a consumer group** keep speaking JoinGroup/SyncGroup/Heartbeat/LeaveGroup:
  a JoinGroup is a full heartbeat (subscription, owned partitions) answered at once with the
  member epoch as generation; SyncGroup hands back its assigned partitions; Heartbeat answers
  REBALANCE_IN_PROGRESS while the member should rejoin (the group epoch moved, it must revoke, or
  partitions it waits for are free). A classic member that does not rejoin or sync within its
  rebalance timeout is removed; its session is its own (the JoinGroup's) session timeout.
* **Downgrade.** When the last member of the consumer protocol leaves and only classic members
  remain (policy `downgrade` or `bidirectional`, and no more than group_max_size), the group becomes a
  classic one at the group epoch as generation, holding the target assignment, and rebalances.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol

from . import records as rec
from .assignors import Assignment, Partition, TopicMeta
from .classic_protocol import encode_assignment, parse_assignment, parse_subscription
from .consumer_model import ClassicMeta, ConsumerGroupData, ConsumerMember, MemberState
from .core import STABLE, E, GroupTable
from .model import Group, JoinRequest, JoinResult, Member, Now, SyncRequest, SyncResult
from .subscriptions import CONSUMER_PROTOCOL_TYPE

JOIN, SYNC = "c-join", "c-sync"  # a classic member's deadlines to rejoin and to sync: (kind, group, member)
UPGRADE, DOWNGRADE = ("upgrade", "bidirectional"), ("downgrade", "bidirectional")


class ConsumerSide(Protocol):
    """What the consumer-protocol side does for a conversion (consumer.ConsumerGroups): named here
    so that the two modules do not import each other."""

    t: GroupTable
    new_member_id: Callable[[], str]

    def topics(self) -> Mapping[str, TopicMeta]: ...

    def refresh(self, g: Group, cg: ConsumerGroupData, topics: Mapping[str, TopicMeta], bump: bool,
                now: Now) -> None: ...

    def reconcile_member(self, g: Group, cg: ConsumerGroupData, m: ConsumerMember, owned: frozenset[Partition] | None,
                         now: Now) -> ConsumerMember: ...

    def touch(self, g: Group, m: ConsumerMember, now: Now) -> None: ...

    def remove_member(self, g: Group, m: ConsumerMember, now: Now) -> None: ...

    def drop_member(self, g: Group, cg: ConsumerGroupData, m: ConsumerMember) -> None: ...

    def write_metadata(self, g: Group, m: ConsumerMember) -> None: ...

    def write_whole(self, g: Group, cg: ConsumerGroupData) -> None: ...

    def write_target_member(self, g: Group, member_id: str, assignment: Assignment) -> None: ...


class ClassicSide(Protocol):
    """What the classic membership does for a conversion (membership.Membership)."""

    def release(self, g: Group) -> None: ...

    def downgraded(self, g: Group, now: Now) -> None: ...


def _ids(topics: Mapping[str, TopicMeta]) -> dict[str, uuid.UUID]:
    return {n: tid for n, (tid, _) in topics.items()}


class Migration:
    def __init__(self, consumer: ConsumerSide, classic: ClassicSide) -> None:
        self.c = consumer
        self.t = consumer.t
        self.classic = classic

    # ---- upgrade -----------------------------------------------------------------------------
    def upgrade(self, g: Group, now: Now) -> ConsumerGroupData | None:
        """The consumer group `g` (a classic group with members) becomes, or None if it may not."""
        s = self.t.settings
        if (s.consumer_migration_policy not in UPGRADE or g.protocol_type != CONSUMER_PROTOCOL_TYPE
                or g.protocol_name is None or len(g.members) > s.max_group_size):
            return None
        ids = _ids(self.c.topics())
        cg = ConsumerGroupData(group_epoch=g.generation, assignment_epoch=g.generation)
        try:
            for m in g.members.values():
                sub = parse_subscription(m.metadata(g.protocol_name))
                held = frozenset((ids[t], p) for t, p in parse_assignment(m.assignment) if t in ids)
                cg.members[m.member_id] = ConsumerMember(
                    m.member_id, m.group_instance_id, sub.rack, m.client_id, m.client_host,
                    tuple(sorted(set(sub.topics))), rebalance_timeout_ms=m.rebalance_timeout_ms,
                    member_epoch=g.generation, previous_member_epoch=g.generation, assigned=held,
                    classic=ClassicMeta(m.session_timeout_ms, tuple(m.protocols)))
        except ValueError:  # metadata that is not the consumer protocol's: Kafka refuses the upgrade
            return None
        self.classic.release(g)
        self.t.write(g.partition, rec.GroupKey(g.group_id), None)
        for mid, cm in cg.members.items():
            cg.target[mid] = cm.assigned
            if cm.instance_id is not None:
                cg.static[cm.instance_id] = mid
        g.members.clear()
        g.static_members.clear()
        g.pending_members.clear()
        g.pending_sync.clear()
        g.consumer, g.leader, g.protocol_name, g.generation = cg, None, None, 0
        g.state = STABLE
        self.c.write_whole(g, cg)
        for cm in cg.members.values():
            self.c.touch(g, cm, now)
        return cg

    # ---- classic members of a consumer group -------------------------------------------------
    def join(self, token: int, req: JoinRequest, now: Now) -> None:
        g = self.t.groups[req.group_id]
        cg = g.consumer
        assert cg is not None

        def answer(r: JoinResult) -> None:
            self.t.reply(token, r)

        s = self.t.settings
        if not s.min_session_timeout_ms <= req.session_timeout_ms <= s.max_session_timeout_ms:
            return answer(JoinResult(E.INVALID_SESSION_TIMEOUT, member_id=req.member_id))
        member_id = req.member_id or self.c.new_member_id()
        known = member_id in cg.members or (req.group_instance_id in cg.static)
        if not known and len(cg.members) >= s.max_group_size:
            return answer(JoinResult(E.GROUP_MAX_SIZE_REACHED, member_id=""))
        names = {n for n, _ in req.protocols}
        classic = [m.classic for m in cg.members.values() if m.classic is not None]
        if req.protocol_type != CONSUMER_PROTOCOL_TYPE or not names or not any(
                all(any(n == pn for pn, _ in c.protocols) for c in classic) for n in names):
            return answer(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id))
        try:
            sub = parse_subscription(req.protocols[0][1])
        except ValueError:
            return answer(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id))
        if not req.member_id and req.require_known_member_id:
            return answer(JoinResult(E.MEMBER_ID_REQUIRED, member_id=member_id))
        found = self._joining(g, cg, req, member_id)
        if isinstance(found, int):
            return answer(JoinResult(found, member_id=req.member_id))
        before = found
        m = replace(before, instance_id=req.group_instance_id, rack_id=sub.rack or before.rack_id,
                    client_id=req.client_id, client_host=req.client_host,
                    rebalance_timeout_ms=req.rebalance_timeout_ms,
                    subscribed_topic_names=tuple(sorted(set(sub.topics))), subscribed_topic_regex=None,
                    server_assignor=None, classic=ClassicMeta(req.session_timeout_ms, tuple(req.protocols)))
        joined = m.member_id not in cg.members
        bump = joined or m.subscribed_topic_names != before.subscribed_topic_names
        if joined or m != before:
            self.c.write_metadata(g, m)
        cg.members[m.member_id] = m
        if m.instance_id is not None:
            cg.static[m.instance_id] = m.member_id
        topics = self.c.topics()
        self.c.refresh(g, cg, topics, bump, now)
        ids = _ids(topics)
        owned: frozenset[Partition] = frozenset((ids[t], p) for t, p in sub.owned if t in ids)
        m = self.c.reconcile_member(g, cg, cg.members[m.member_id], owned, now)
        self.t.timers.cancel((JOIN, g.group_id, m.member_id))
        self.t.timers.schedule((SYNC, g.group_id, m.member_id), now.mono + max(req.rebalance_timeout_ms, 0))
        self.c.touch(g, m, now)
        answer(JoinResult(0, member_id=m.member_id, generation_id=m.member_epoch,
                          protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=req.protocols[0][0]))

    def _joining(self, g: Group, cg: ConsumerGroupData, req: JoinRequest, member_id: str) -> ConsumerMember | int:
        iid = req.group_instance_id
        old_id = cg.static.get(iid) if iid is not None else None
        if old_id is not None and not req.member_id:
            # a static member back under a new id takes the old one's place (Kafka: epoch 0)
            old = cg.members[old_id]
            self.c.drop_member(g, cg, old)
            m = replace(old, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            cg.target[member_id] = cg.target.pop(old_id, frozenset())
            self.c.write_target_member(g, member_id, cg.target[member_id])
            return m
        if old_id is not None and old_id != member_id:
            return E.FENCED_INSTANCE_ID
        if req.member_id:
            known = cg.members.get(member_id)
            if known is None or known.classic is None:
                return E.UNKNOWN_MEMBER_ID
            return known
        return ConsumerMember(member_id)

    def _member(self, cg: ConsumerGroupData, member_id: str, instance_id: str | None) -> ConsumerMember | int:
        if instance_id is not None:
            cur = cg.static.get(instance_id)
            if cur is None:
                return E.UNKNOWN_MEMBER_ID
            if cur != member_id:
                return E.FENCED_INSTANCE_ID
        m = cg.members.get(member_id)
        return E.UNKNOWN_MEMBER_ID if m is None or m.classic is None else m

    def _must_rejoin(self, g: Group, cg: ConsumerGroupData, m: ConsumerMember, now: Now) -> bool:
        """Kafka's rule for telling a classic member REBALANCE_IN_PROGRESS; its rejoin is then due
        within its rebalance timeout."""
        waiting = False
        if m.state is MemberState.UNRELEASED_PARTITIONS:
            held = frozenset(p for o in cg.members.values() if o.member_id != m.member_id
                             for p in o.assigned | o.pending_revocation)
            waiting = bool((cg.target.get(m.member_id, frozenset()) - m.assigned) & held)
        rejoin = (m.member_epoch < cg.group_epoch or m.state is MemberState.UNREVOKED_PARTITIONS
                  or (m.state is MemberState.UNRELEASED_PARTITIONS and not waiting))
        if rejoin:
            self.t.timers.schedule((JOIN, g.group_id, m.member_id), now.mono + max(m.rebalance_timeout_ms, 0),
                                   earlier_only=True)
        return rejoin

    def sync(self, token: int, req: SyncRequest, now: Now) -> None:
        g = self.t.groups[req.group_id]
        cg = g.consumer
        assert cg is not None
        m = self._member(cg, req.member_id, req.group_instance_id)
        if isinstance(m, int):
            return self.t.reply(token, SyncResult(m))
        assert m.classic is not None
        name, metadata = m.classic.protocols[0]
        if req.generation_id != m.member_epoch:
            return self.t.reply(token, SyncResult(E.ILLEGAL_GENERATION))
        if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                req.protocol_name is not None and req.protocol_name != name):
            return self.t.reply(token, SyncResult(E.INCONSISTENT_GROUP_PROTOCOL))
        if cg.group_epoch > m.member_epoch and m.state is not MemberState.UNREVOKED_PARTITIONS:
            self._must_rejoin(g, cg, m, now)
            return self.t.reply(token, SyncResult(E.REBALANCE_IN_PROGRESS))
        self.t.timers.cancel((SYNC, g.group_id, m.member_id))
        self.c.touch(g, m, now)
        names = {tid: n for n, (tid, _) in self.c.topics().items()}
        try:
            version = parse_subscription(metadata).version
        except ValueError:
            version = 0
        parts = [(names[t], p) for t, p in m.assigned if t in names]
        self.t.reply(token, SyncResult(0, CONSUMER_PROTOCOL_TYPE, name, encode_assignment(parts, version)))

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation: int, now: Now) -> int:
        g = self.t.groups[group_id]
        cg = g.consumer
        assert cg is not None
        m = self._member(cg, member_id, instance_id)
        if isinstance(m, int):
            return m
        if generation != m.member_epoch:
            return E.ILLEGAL_GENERATION
        self.c.touch(g, m, now)
        return E.REBALANCE_IN_PROGRESS if self._must_rejoin(g, cg, m, now) else 0

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]], now: Now) -> tuple[int, list[int]]:
        g = self.t.groups[group_id]
        errors: list[int] = []
        for mid, iid in leaving:
            cg = g.consumer
            if cg is None:  # the group went back to classic with an earlier leaver
                errors.append(E.UNKNOWN_MEMBER_ID)
                continue
            if iid is not None and not mid:
                mid = cg.static.get(iid, "")
            m = self._member(cg, mid, iid)
            if isinstance(m, int):
                errors.append(m)
                continue
            self.c.remove_member(g, m, now)
            errors.append(0)
        return 0, errors

    def on_timer(self, g: Group, m: ConsumerMember, now: Now) -> None:
        if m.classic is not None:
            self.c.remove_member(g, m, now)

    # ---- downgrade ---------------------------------------------------------------------------
    def may_downgrade(self, cg: ConsumerGroupData, leaving: ConsumerMember) -> bool:
        others = [o for o in cg.members.values() if o.member_id != leaving.member_id]
        return (leaving.classic is None and bool(others) and all(o.classic is not None for o in others)
                and self.t.settings.consumer_migration_policy in DOWNGRADE
                and len(others) <= self.t.settings.max_group_size)

    def downgrade(self, g: Group, cg: ConsumerGroupData, leaving: ConsumerMember, now: Now) -> None:
        """The classic group of the remaining (classic) members, at the group epoch, rebalancing."""
        names = {tid: n for n, (tid, _) in self.c.topics().items()}
        others = [o for o in cg.members.values() if o.member_id != leaving.member_id]
        for m in list(cg.members.values()):
            self.c.drop_member(g, cg, m)
        for key in rec.consumer_group_keys(g.group_id):
            self.t.write(g.partition, key, None)
        members: dict[str, Member] = {}
        for o in others:
            assert o.classic is not None
            try:
                version = parse_subscription(o.classic.protocols[0][1]).version
            except ValueError:
                version = 0
            parts = [(names[t], p) for t, p in cg.target.get(o.member_id, frozenset()) if t in names]
            members[o.member_id] = Member(o.member_id, o.instance_id, o.client_id, o.client_host,
                                          o.rebalance_timeout_ms, o.classic.session_timeout_ms,
                                          CONSUMER_PROTOCOL_TYPE, list(o.classic.protocols),
                                          encode_assignment(parts, version))
        g.consumer = None
        g.members = members
        g.static_members = {m.group_instance_id: mid for mid, m in members.items() if m.group_instance_id}
        g.generation, g.protocol_type, g.leader = cg.group_epoch, CONSUMER_PROTOCOL_TYPE, next(iter(members))
        g.state = STABLE
        self.classic.downgraded(g, now)
