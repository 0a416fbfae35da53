"""KIP-848 consumer groups: ConsumerGroupHeartbeat, ConsumerGroupDescribe, their timers and records,
and the member checks of offset commits and fetches for such groups (docs/groups.md).

The broker decides everything: each heartbeat may change the member (a new subscription), then the
group's epoch (membership, subscriptions or the subscribed topics changed), then the target
assignment (computed at once by the group's assignor, so the group is never "Assigning"), then the
member's own assignment, one step towards the target (consumer_model.reconcile). Every change is a
record in `__consumer_offsets` in Kafka's layout, and load_* rebuild the group from them.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from protocol.messages import coordinator_records as cr

from . import records as rec
from .assignors import ASSIGNORS, Assignment, Partition, TopicMeta
from .consumer_model import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupData,
    ConsumerMember,
    MemberState,
    compile_regex,
    reconcile,
)
from .core import EMPTY, STABLE, E, GroupTable, TimerKey
from .model import Group, Now
from .subscriptions import CONSUMER_PROTOCOL_TYPE

if TYPE_CHECKING:
    from .migration import Migration

SESSION, REVOCATION = "c-session", "c-revoke"  # the timers' kinds: (kind, group id, member id)
CLASSIC_JOIN, CLASSIC_SYNC = "c-join", "c-sync"  # a classic member's (migration.py)
TIMER_KINDS = (SESSION, REVOCATION, CLASSIC_JOIN, CLASSIC_SYNC)
TopicsView = Callable[[], Mapping[str, TopicMeta]]


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeat:
    """A ConsumerGroupHeartbeat; None (or -1) fields did not change since the member's last one."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: frozenset[Partition] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass(frozen=True, slots=True)
class ConsumerMemberSummary:
    member: ConsumerMember
    target: Assignment


@dataclass(frozen=True, slots=True)
class ConsumerGroupSummary:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ConsumerMemberSummary, ...] = ()
    topic_names: dict[uuid.UUID, str] = field(default_factory=dict)


class ConsumerGroups:
    def __init__(self, table: GroupTable, topics: TopicsView,
                 new_member_id: Callable[[], str] | None = None) -> None:
        self.t = table
        self.topics = topics
        self.new_member_id = new_member_id or (lambda: str(uuid.uuid4()))
        self.migration: Migration | None = None  # set by state.py: classic members and conversions

    # ---- ConsumerGroupHeartbeat --------------------------------------------------------------
    def heartbeat(self, req: ConsumerHeartbeat, now: Now) -> HeartbeatResult:
        invalid = self._invalid(req)
        if invalid is not None:
            return invalid
        err = self.t.coordinator_error(req.group_id)
        if err:
            return HeartbeatResult(err)
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(req, now)
        found = self._group_for(req, now)
        if isinstance(found, HeartbeatResult):
            return found
        g, cg = found
        member = self._member_for(g, cg, req, now)
        if isinstance(member, HeartbeatResult):
            return member
        topics = self.topics()
        before = member
        member = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            client_id=req.client_id, client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 else member.rebalance_timeout_ms,
            subscribed_topic_names=(tuple(sorted(set(req.subscribed_topic_names)))
                                    if req.subscribed_topic_names is not None else member.subscribed_topic_names),
            subscribed_topic_regex=((req.subscribed_topic_regex or None) if req.subscribed_topic_regex is not None
                                    else member.subscribed_topic_regex),
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor)
        joined = member.member_id not in cg.members
        bump = joined or (member.subscribed_topic_names, member.subscribed_topic_regex, member.server_assignor) != (
            before.subscribed_topic_names, before.subscribed_topic_regex, before.server_assignor)
        if joined or _metadata_of(member) != _metadata_of(before):
            self.write_metadata(g, member)
        cg.members[member.member_id] = member
        if member.instance_id is not None:
            cg.static[member.instance_id] = member.member_id
        self.refresh(g, cg, topics, bump, now)
        member = self.reconcile_member(g, cg, cg.members[member.member_id], req.owned, now)
        self.touch(g, member, now)
        return HeartbeatResult(0, member_id=member.member_id, member_epoch=member.member_epoch,
                               heartbeat_interval_ms=self.t.settings.consumer_heartbeat_interval_ms,
                               assignment=member.assigned)

    def _invalid(self, req: ConsumerHeartbeat) -> HeartbeatResult | None:
        """Kafka's request checks: INVALID_REQUEST, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION."""
        def bad(message: str, code: int = E.INVALID_REQUEST) -> HeartbeatResult:
            return HeartbeatResult(code, message)

        if not req.group_id:
            return bad("GroupId can't be empty.")
        if req.instance_id == "":
            return bad("InstanceId can't be empty.")
        if req.rack_id == "":
            return bad("RackId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                return bad("RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or req.owned:
                return bad("TopicPartitions must be empty when (re-)joining.")
            if not req.subscribed_topic_names and not req.subscribed_topic_regex:
                return bad("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif req.member_epoch > 0 or req.member_epoch == LEAVE_EPOCH:
            if not req.member_id:
                return bad("MemberId can't be empty.")
        elif req.member_epoch == STATIC_LEAVE_EPOCH:
            if not req.member_id:
                return bad("MemberId can't be empty.")
            if req.instance_id is None:
                return bad("InstanceId can't be null.")
        else:
            return bad("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.t.settings.consumer_assignors:
            return bad(f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                       f"{', '.join(self.t.settings.consumer_assignors)}.", E.UNSUPPORTED_ASSIGNOR)
        if req.subscribed_topic_regex and compile_regex(req.subscribed_topic_regex) is None:
            return bad(f"SubscribedTopicRegex {req.subscribed_topic_regex} is not a valid regular expression.",
                       E.INVALID_REGULAR_EXPRESSION)
        return None

    def _group_for(self, req: ConsumerHeartbeat, now: Now) -> tuple[Group, ConsumerGroupData] | HeartbeatResult:
        """The consumer group, made on a first join, or made of an empty classic group (whose
        offsets it keeps: the conversion KIP-848 allows without an online upgrade)."""
        g = self.t.groups.get(req.group_id)
        if g is not None and g.consumer is not None:
            return g, g.consumer
        if req.member_epoch != 0:
            return HeartbeatResult(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                                   f"{req.group_id}.")
        if g is None:
            g = self.t.groups[req.group_id] = Group(req.group_id, self.t.partition_for(req.group_id),
                                                    state_timestamp=now.wall)
        elif g.members or g.pending_members:
            cg = self.migration.upgrade(g, now) if self.migration is not None and g.share is None else None
            if cg is None:
                return HeartbeatResult(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
            return g, cg
        else:
            self.t.write(g.partition, rec.GroupKey(g.group_id), None)  # the classic group's record goes
        g.consumer = ConsumerGroupData()
        g.protocol_type, g.protocol_name, g.leader, g.generation = CONSUMER_PROTOCOL_TYPE, None, None, 0
        g.state = EMPTY
        return g, g.consumer

    def _member_for(self, g: Group, cg: ConsumerGroupData, req: ConsumerHeartbeat,
                    now: Now) -> ConsumerMember | HeartbeatResult:
        if req.member_epoch == 0:
            return self._joining(g, cg, req, now)
        m = cg.members.get(req.member_id)
        if m is None:
            return HeartbeatResult(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                                   f"{req.group_id}.")
        if req.member_epoch != m.member_epoch and not (
                req.member_epoch == m.previous_member_epoch and req.owned is not None and req.owned <= m.assigned):
            # a response lost on its way may leave the member one epoch behind: it may retry with the
            # previous epoch as long as it owns nothing it should not (Kafka's rule)
            return HeartbeatResult(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch "
                                   f"({req.member_epoch}) than the one known by the group coordinator "
                                   f"({m.member_epoch})." if req.member_epoch > m.member_epoch else
                                   f"The consumer group member has a smaller member epoch ({req.member_epoch}) "
                                   f"than the one known by the group coordinator ({m.member_epoch}).")
        return m

    def _joining(self, g: Group, cg: ConsumerGroupData, req: ConsumerHeartbeat,
                 now: Now) -> ConsumerMember | HeartbeatResult:
        member_id = req.member_id or self.new_member_id()
        if req.instance_id is not None:
            old_id = cg.static.get(req.instance_id)
            if old_id is not None and old_id != member_id:
                old = cg.members[old_id]
                if old.member_epoch != STATIC_LEAVE_EPOCH:
                    return HeartbeatResult(E.UNRELEASED_INSTANCE_ID, f"Static member {old_id} with instance id "
                                           f"{req.instance_id} is not released yet.")
                return self._replace_static(g, cg, old, member_id, now)
        m = cg.members.get(member_id)
        if m is not None:
            # a member that lost its place rejoins under its id: it owns nothing now (its request says so)
            m = replace(m, member_epoch=0, previous_member_epoch=-1, state=MemberState.STABLE,
                        assigned=frozenset(), pending_revocation=frozenset())
            cg.members[member_id] = m
            self._write_current(g, m)
            return m
        if len(cg.members) >= self.t.settings.max_group_size:
            return HeartbeatResult(E.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum "
                                   f"capacity of {self.t.settings.max_group_size} members.")
        return ConsumerMember(member_id)

    def _replace_static(self, g: Group, cg: ConsumerGroupData, old: ConsumerMember, member_id: str,
                        now: Now) -> ConsumerMember:
        """A static member back under a new member id takes the place (epoch, assignment and target)
        its previous incarnation left with epoch -2: no rebalance."""
        self.drop_member(g, cg, old)
        m = replace(old, member_id=member_id, member_epoch=old.previous_member_epoch
                    if old.member_epoch == STATIC_LEAVE_EPOCH else old.member_epoch)
        cg.members[member_id] = m
        cg.target[member_id] = cg.target.pop(old.member_id, frozenset())
        self._write(g, rec.ConsumerKey(rec.CONSUMER_MEMBER, g.group_id, member_id), _metadata_of(m))
        self.write_target_member(g, member_id, cg.target[member_id])
        self._write_current(g, m)
        return m

    # ---- the group epoch, the target and the member's step towards it -------------------------
    def refresh(self, g: Group, cg: ConsumerGroupData, topics: Mapping[str, TopicMeta], bump: bool,
                 now: Now) -> None:
        """Bump the group epoch if membership or subscriptions changed, or the subscribed topics did
        (a new topic a regex matches, more partitions); then the target follows the epoch."""
        subscribed = frozenset().union(*(m.subscribed(topics) for m in cg.members.values()))
        metadata = {n: topics[n] for n in sorted(subscribed)}
        if metadata != cg.subscription_metadata:
            cg.subscription_metadata = metadata
            self._write(g, rec.ConsumerKey(rec.CONSUMER_PARTITIONS, g.group_id), cr.ConsumerGroupPartitionMetadataValue(
                topics=[cr.TopicMetadata(topic_id=tid, topic_name=n, num_partitions=count)
                        for n, (tid, count) in metadata.items()]))
            bump = True
        g.subscribed_topics = frozenset(metadata)
        if bump:
            cg.group_epoch += 1
            self._write(g, rec.ConsumerKey(rec.CONSUMER_GROUP, g.group_id), cr.ConsumerGroupMetadataValue(
                epoch=cg.group_epoch))
        if cg.group_epoch > cg.assignment_epoch:
            self._assign(g, cg, topics)
        self._sync_state(g, now)

    def assignor_of(self, cg: ConsumerGroupData) -> str:
        """The assignor most members ask for (ties: the first configured), else the default."""
        configured = self.t.settings.consumer_assignors
        votes = Counter(m.server_assignor for m in cg.members.values() if m.server_assignor in configured)
        if not votes:
            return configured[0]
        return max(votes, key=lambda a: (votes[a], -configured.index(a)))  # type: ignore[arg-type]

    def _assign(self, g: Group, cg: ConsumerGroupData, topics: Mapping[str, TopicMeta]) -> None:
        subscriptions = {mid: m.subscribed(topics) for mid, m in cg.members.items()}
        target = ASSIGNORS[self.assignor_of(cg)](subscriptions, topics, cg.target)
        for mid, assignment in target.items():
            if cg.target.get(mid) != assignment:
                self.write_target_member(g, mid, assignment)
        cg.target = target
        cg.assignment_epoch = cg.group_epoch
        self._write(g, rec.ConsumerKey(rec.CONSUMER_TARGET, g.group_id),
                    cr.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=cg.assignment_epoch))

    def reconcile_member(self, g: Group, cg: ConsumerGroupData, m: ConsumerMember, owned: frozenset[Partition] | None,
                   now: Now) -> ConsumerMember:
        held = frozenset(p for o in cg.members.values() if o.member_id != m.member_id
                         for p in o.assigned | o.pending_revocation)
        after = reconcile(m, cg.target.get(m.member_id, frozenset()), cg.assignment_epoch, owned, held)
        if after != m:
            cg.members[m.member_id] = after
            self._write_current(g, after)
            key: TimerKey = (REVOCATION, g.group_id, m.member_id)
            if after.state is MemberState.UNREVOKED_PARTITIONS:
                if m.state is not MemberState.UNREVOKED_PARTITIONS or after.member_epoch != m.member_epoch:
                    self.t.timers.schedule(key, now.mono + max(after.rebalance_timeout_ms, 0))
            else:
                self.t.timers.cancel(key)
        return after

    def touch(self, g: Group, m: ConsumerMember, now: Now) -> None:
        """The member's session restarts: the broker's session timeout, or a classic member's own."""
        timeout = m.classic.session_timeout_ms if m.classic is not None else self.t.settings.consumer_session_timeout_ms
        self.t.timers.schedule((SESSION, g.group_id, m.member_id), now.mono + timeout)

    def _sync_state(self, g: Group, now: Now) -> None:
        """The classic state the offsets' rules read: Empty (retention runs) or Stable."""
        assert g.consumer is not None
        state = STABLE if g.consumer.members else EMPTY
        if state is not g.state:
            g.transition(state, now)

    # ---- leaving, fencing, timers ------------------------------------------------------------
    def _leave(self, req: ConsumerHeartbeat, now: Now) -> HeartbeatResult:
        g = self.t.groups.get(req.group_id)
        cg = g.consumer if g is not None else None
        m = cg.members.get(req.member_id) if cg is not None else None
        if g is None or cg is None or m is None:
            return HeartbeatResult(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                                   f"{req.group_id}.")
        if req.member_epoch == STATIC_LEAVE_EPOCH and m.instance_id is not None:
            # a static member going away for a while keeps its place and partitions until its session ends
            left = replace(m, member_epoch=STATIC_LEAVE_EPOCH, previous_member_epoch=m.member_epoch)
            cg.members[m.member_id] = left
            self._write_current(g, left)
            self.t.timers.cancel((REVOCATION, g.group_id, m.member_id))
            self.touch(g, left, now)
        else:
            self.remove_member(g, m, now)
        return HeartbeatResult(0, member_id=req.member_id, member_epoch=req.member_epoch)

    def remove_member(self, g: Group, m: ConsumerMember, now: Now) -> None:
        """The member is gone (left, session expired, revocation timed out): its partitions are free
        and the group's epoch moves, so the others' target is recomputed; or, the last member of the
        consumer protocol gone, the classic members left take the group back to classic."""
        assert g.consumer is not None
        cg = g.consumer
        if self.migration is not None and self.migration.may_downgrade(cg, m):
            self.migration.downgrade(g, cg, m, now)
            return
        self.drop_member(g, cg, m)
        cg.target.pop(m.member_id, None)
        self.refresh(g, cg, self.topics(), True, now)

    def drop_member(self, g: Group, cg: ConsumerGroupData, m: ConsumerMember) -> None:
        del cg.members[m.member_id]
        if m.instance_id is not None and cg.static.get(m.instance_id) == m.member_id:
            del cg.static[m.instance_id]
        for key in rec.consumer_member_keys(g.group_id, m.member_id):
            self.t.write(g.partition, key, None)
        for kind in TIMER_KINDS:
            self.t.timers.cancel((kind, g.group_id, m.member_id))

    def on_timer(self, key: TimerKey, now: Now) -> None:
        """A member's session ended, or it did not revoke within its rebalance timeout: fenced."""
        g = self.t.groups.get(key[1])
        cg = g.consumer if g is not None else None
        m = cg.members.get(key[2]) if cg is not None else None
        if g is None or m is None:
            return
        if key[0] == REVOCATION and m.state is not MemberState.UNREVOKED_PARTITIONS:
            return
        if key[0] in (CLASSIC_JOIN, CLASSIC_SYNC):
            if self.migration is not None:
                self.migration.on_timer(g, m, now)
            return
        self.remove_member(g, m, now)

    # ---- conversions -------------------------------------------------------------------------
    def yield_to_classic(self, group_id: str, now: Now) -> bool:
        """A classic JoinGroup for `group_id`: an empty consumer group becomes a classic one (keeping
        its offsets); False if it has members (INCONSISTENT_GROUP_PROTOCOL: no online downgrade)."""
        g = self.t.groups.get(group_id)
        if g is None or g.consumer is None or self.t.coordinator_error(group_id):
            return True
        if g.consumer.members:
            return False
        for key in rec.consumer_group_keys(group_id):
            self.t.write(g.partition, key, None)
        g.consumer = None
        g.protocol_type = None
        g.subscribed_topics = None
        return True

    def tombstones(self, g: Group) -> list[rec.Key]:
        """Every record key of a group being deleted."""
        if g.consumer is None:
            return [rec.GroupKey(g.group_id)]
        keys: list[rec.Key] = [k for mid in g.consumer.members for k in rec.consumer_member_keys(g.group_id, mid)]
        return keys + list(rec.consumer_group_keys(g.group_id))

    # ---- offsets' member checks (Kafka's ConsumerGroup.validateOffsetCommit / validateOffsetFetch) ---
    def commit_error(self, g: Group, member_id: str, member_epoch: int, transactional: bool,
                     api_version: int = 9) -> int:
        assert g.consumer is not None
        if member_epoch < 0 and not g.consumer.members:
            return 0  # the admin client, or a consumer without group management, on an empty group
        if transactional and member_epoch < 0 and not member_id:
            return 0  # a transactional producer that does not say which member it commits for
        m = g.consumer.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if not transactional and m.classic is None and api_version < 9:
            # a member of the new protocol commits with v9+, which carries its member epoch
            return E.UNSUPPORTED_VERSION
        if member_epoch != m.member_epoch:
            # TxnOffsetCommit has no STALE_MEMBER_EPOCH: Kafka answers ILLEGAL_GENERATION there, and to
            # a classic member (whose epoch is its generation)
            return E.ILLEGAL_GENERATION if transactional or m.classic is not None else E.STALE_MEMBER_EPOCH
        return 0

    def fetch_error(self, g: Group, member_id: str | None, member_epoch: int) -> int:
        assert g.consumer is not None
        if member_id is None and member_epoch < 0:
            return 0
        m = g.consumer.members.get(member_id or "")
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        return E.STALE_MEMBER_EPOCH if member_epoch != m.member_epoch else 0

    # ---- describe ----------------------------------------------------------------------------
    def describe(self, group_id: str) -> tuple[int, ConsumerGroupSummary | None]:
        err = self.t.coordinator_error(group_id) if group_id else E.INVALID_GROUP_ID
        if err:
            return err, None
        g = self.t.groups.get(group_id)
        if g is None or g.consumer is None:
            return E.GROUP_ID_NOT_FOUND, None
        cg = g.consumer
        names = {tid: n for n, (tid, _) in self.topics().items()}
        return 0, ConsumerGroupSummary(
            group_id, cg.state(), cg.group_epoch, cg.assignment_epoch, self.assignor_of(cg),
            tuple(ConsumerMemberSummary(m, cg.target.get(m.member_id, frozenset())) for m in cg.members.values()),
            names)

    # ---- records -----------------------------------------------------------------------------
    def write_metadata(self, g: Group, m: ConsumerMember) -> None:
        self._write(g, rec.ConsumerKey(rec.CONSUMER_MEMBER, g.group_id, m.member_id), _metadata_of(m))

    def write_whole(self, g: Group, cg: ConsumerGroupData) -> None:
        """Every record of a group made at once (an upgrade), in Kafka's order."""
        for m in cg.members.values():
            self.write_metadata(g, m)
        self._write(g, rec.ConsumerKey(rec.CONSUMER_GROUP, g.group_id), cr.ConsumerGroupMetadataValue(
            epoch=cg.group_epoch))
        for mid, target in cg.target.items():
            self.write_target_member(g, mid, target)
        self._write(g, rec.ConsumerKey(rec.CONSUMER_TARGET, g.group_id),
                    cr.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=cg.assignment_epoch))
        for m in cg.members.values():
            self._write_current(g, m)

    def _write(self, g: Group, key: rec.ConsumerKey, value: cr._Record) -> None:
        self.t.write(g.partition, key, rec.encode_consumer_value(value))

    def write_target_member(self, g: Group, member_id: str, assignment: Assignment) -> None:
        self._write(g, rec.ConsumerKey(rec.CONSUMER_TARGET_MEMBER, g.group_id, member_id),
                    cr.ConsumerGroupTargetAssignmentMemberValue(topic_partitions=to_topic_partitions(assignment)))

    def _write_current(self, g: Group, m: ConsumerMember) -> None:
        self._write(g, rec.ConsumerKey(rec.CONSUMER_CURRENT, g.group_id, m.member_id),
                    cr.ConsumerGroupCurrentMemberAssignmentValue(
                        member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
                        state=int(m.state), assigned_partitions=to_topic_partitions(m.assigned),
                        partitions_pending_revocation=to_topic_partitions(m.pending_revocation)))

    def resume(self, g: Group, now: Now) -> None:
        """A group read back from its records: every member must heartbeat within a session from
        now, and one still revoking within its rebalance timeout, as after a coordinator move in Kafka."""
        assert g.consumer is not None
        for m in g.consumer.members.values():
            self.touch(g, m, now)
            if m.state is MemberState.UNREVOKED_PARTITIONS:
                self.t.timers.schedule((REVOCATION, g.group_id, m.member_id),
                                       now.mono + max(m.rebalance_timeout_ms, 0))
        g.subscribed_topics = frozenset(g.consumer.subscription_metadata)
        g.protocol_type = CONSUMER_PROTOCOL_TYPE
        g.state = STABLE if g.consumer.members else EMPTY


def _metadata_of(m: ConsumerMember) -> cr.ConsumerGroupMemberMetadataValue:
    return cr.ConsumerGroupMemberMetadataValue(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex,
        rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
        classic_member_metadata=None if m.classic is None else cr.ClassicMemberMetadata(
            session_timeout_ms=m.classic.session_timeout_ms,
            supported_protocols=[cr.ClassicProtocol(name=n, metadata=md) for n, md in m.classic.protocols]))


def to_topic_partitions(assignment: Assignment) -> list[cr.ConsumerTopicPartitions]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for tid, p in sorted(assignment):
        by_topic.setdefault(tid, []).append(p)
    return [cr.ConsumerTopicPartitions(topic_id=tid, partitions=ps) for tid, ps in by_topic.items()]


def from_topic_partitions(tps: list[cr.ConsumerTopicPartitions]) -> Assignment:
    return frozenset((t.topic_id, p) for t in tps for p in t.partitions)
