"""KIP-932 share groups in the group coordinator: ShareGroupHeartbeat, ShareGroupDescribe, the
members' session timer and the group's records in `__consumer_offsets` (docs/groups.md).

The same model as KIP-848 consumer groups (consumer.py), without its revocation step: a heartbeat may
change the member (a new subscription), then the group epoch (membership, subscriptions or the
subscribed topics changed), then the target assignment (assignors.simple: every member gets
partitions, members share them when they outnumber them), and the member takes its target at once,
at the assignment epoch. The records are Kafka's share-group records (key versions 10 to 14), read
back by `load_record` / `build`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from protocol.messages import coordinator_records as cr

from . import records as rec
from .assignors import Assignment, TopicMeta, simple
from .consumer import HeartbeatResult, from_topic_partitions, to_topic_partitions
from .consumer_loading import put_or_drop
from .consumer_model import LEAVE_EPOCH
from .core import EMPTY, STABLE, E, GroupTable, TimerKey
from .model import Group, Now
from .share_model import ShareGroupData, ShareMember

SHARE_PROTOCOL_TYPE = "share"
SESSION = "s-session"  # the timer's kind: (kind, group id, member id)
TopicsView = Callable[[], Mapping[str, TopicMeta]]


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    """A ShareGroupHeartbeat; None fields did not change since the member's last one."""

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareGroupSummary:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    members: tuple[ShareMember, ...] = ()
    topic_names: dict[uuid.UUID, str] = field(default_factory=dict)


ASSIGNOR_NAME = "simple"


class ShareGroups:
    def __init__(self, table: GroupTable, topics: TopicsView,
                 new_member_id: Callable[[], str] | None = None) -> None:
        self.t = table
        self._topics = topics
        self._new_member_id = new_member_id or (lambda: str(uuid.uuid4()))

    # ---- ShareGroupHeartbeat -----------------------------------------------------------------
    def heartbeat(self, req: ShareHeartbeat, now: Now) -> HeartbeatResult:
        invalid = _invalid(req)
        if invalid is not None:
            return invalid
        err = self.t.coordinator_error(req.group_id)
        if err:
            return HeartbeatResult(err)
        if req.member_epoch == LEAVE_EPOCH:
            return self._leave(req, now)
        g = self.t.groups.get(req.group_id)
        if g is None or g.share is None:
            if not _convertible(g):
                return HeartbeatResult(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a share group.")
            if req.member_epoch != 0:
                return HeartbeatResult(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                                       f"{req.group_id}.")
            if g is None:
                g = self.t.groups[req.group_id] = Group(req.group_id, self.t.partition_for(req.group_id),
                                                        state_timestamp=now.wall)
            g.share = ShareGroupData()
            g.protocol_type = SHARE_PROTOCOL_TYPE
        sg = g.share
        m = self._member_for(sg, req)
        if isinstance(m, HeartbeatResult):
            return m
        before = m
        m = replace(m, rack_id=req.rack_id if req.rack_id is not None else m.rack_id,
                    client_id=req.client_id, client_host=req.client_host,
                    subscribed_topic_names=(tuple(sorted(set(req.subscribed_topic_names)))
                                            if req.subscribed_topic_names is not None else m.subscribed_topic_names))
        joined = m.member_id not in sg.members
        if joined or _metadata_of(m) != _metadata_of(before):
            self._write(g, rec.ConsumerKey(rec.SHARE_MEMBER, g.group_id, m.member_id), _metadata_of(m))
        sg.members[m.member_id] = m
        self._refresh(g, sg, joined or m.subscribed_topic_names != before.subscribed_topic_names, now)
        m = self._catch_up(g, sg, sg.members[m.member_id])
        self.t.timers.schedule((SESSION, g.group_id, m.member_id), now.mono + self.t.settings.share_session_timeout_ms)
        return HeartbeatResult(0, member_id=m.member_id, member_epoch=m.member_epoch,
                               heartbeat_interval_ms=self.t.settings.share_heartbeat_interval_ms, assignment=m.assigned)

    def _member_for(self, sg: ShareGroupData, req: ShareHeartbeat) -> ShareMember | HeartbeatResult:
        if req.member_epoch == 0:
            member_id = req.member_id or self._new_member_id()
            if member_id in sg.members:  # back after losing its place: it starts over
                return replace(sg.members[member_id], member_epoch=0, previous_member_epoch=-1, assigned=frozenset())
            if len(sg.members) >= self.t.settings.max_group_size:
                return HeartbeatResult(E.GROUP_MAX_SIZE_REACHED, f"The share group has reached its maximum capacity "
                                       f"of {self.t.settings.max_group_size} members.")
            return ShareMember(member_id)
        m = sg.members.get(req.member_id)
        if m is None:
            return HeartbeatResult(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                                   f"{req.group_id}.")
        if req.member_epoch != m.member_epoch:
            return HeartbeatResult(E.FENCED_MEMBER_EPOCH, f"The share group member has member epoch "
                                   f"{req.member_epoch}, the group coordinator {m.member_epoch}.")
        return m

    def _refresh(self, g: Group, sg: ShareGroupData, bump: bool, now: Now) -> None:
        """A new group epoch when membership or subscriptions changed, or the subscribed topics did
        (created, more partitions); then a new target at once."""
        topics = self._topics()
        subscribed = {n for m in sg.members.values() for n in m.subscribed_topic_names if n in topics}
        metadata = {n: topics[n] for n in sorted(subscribed)}
        if metadata != sg.subscription_metadata:
            sg.subscription_metadata = metadata
            bump = True
        g.subscribed_topics = frozenset(metadata)
        if bump:
            sg.group_epoch += 1
            self._write(g, rec.ConsumerKey(rec.SHARE_GROUP, g.group_id), cr.ShareGroupMetadataValue(epoch=sg.group_epoch))
            target = simple({mid: frozenset(m.subscribed_topic_names) for mid, m in sg.members.items()}, topics)
            for mid, a in target.items():
                if sg.target.get(mid) != a:
                    self._write(g, rec.ConsumerKey(rec.SHARE_TARGET_MEMBER, g.group_id, mid),
                                cr.ShareGroupTargetAssignmentMemberValue(topic_partitions=to_topic_partitions(a)))
            sg.target = target
            sg.assignment_epoch = sg.group_epoch
            self._write(g, rec.ConsumerKey(rec.SHARE_TARGET, g.group_id),
                        cr.ShareGroupTargetAssignmentMetadataValue(assignment_epoch=sg.assignment_epoch))
        state = STABLE if sg.members else EMPTY
        if state is not g.state:
            g.transition(state, now)

    def _catch_up(self, g: Group, sg: ShareGroupData, m: ShareMember) -> ShareMember:
        """No revocation in share groups: the member moves to the assignment epoch and its target."""
        if m.member_epoch == sg.assignment_epoch and m.assigned == sg.target.get(m.member_id, frozenset()):
            return m
        after = replace(m, member_epoch=sg.assignment_epoch, previous_member_epoch=m.member_epoch,
                        assigned=sg.target.get(m.member_id, frozenset()))
        sg.members[m.member_id] = after
        self._write(g, rec.ConsumerKey(rec.SHARE_CURRENT, g.group_id, m.member_id),
                    cr.ShareGroupCurrentMemberAssignmentValue(
                        member_epoch=after.member_epoch, previous_member_epoch=after.previous_member_epoch, state=0,
                        assigned_partitions=to_topic_partitions(after.assigned)))
        return after

    # ---- leaving and the session timer -------------------------------------------------------
    def _leave(self, req: ShareHeartbeat, now: Now) -> HeartbeatResult:
        g = self.t.groups.get(req.group_id)
        m = g.share.members.get(req.member_id) if g is not None and g.share is not None else None
        if g is None or m is None:
            return HeartbeatResult(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                                   f"{req.group_id}.")
        self.remove_member(g, m, now)
        return HeartbeatResult(0, member_id=req.member_id, member_epoch=LEAVE_EPOCH)

    def remove_member(self, g: Group, m: ShareMember, now: Now) -> None:
        assert g.share is not None
        del g.share.members[m.member_id]
        g.share.target.pop(m.member_id, None)
        for key in rec.share_member_keys(g.group_id, m.member_id):
            self.t.write(g.partition, key, None)
        self.t.timers.cancel((SESSION, g.group_id, m.member_id))
        self._refresh(g, g.share, True, now)

    def on_timer(self, key: TimerKey, now: Now) -> None:
        """A member's session ended: it is out, and the others' target is recomputed."""
        g = self.t.groups.get(key[1])
        m = g.share.members.get(key[2]) if g is not None and g.share is not None else None
        if g is not None and m is not None:
            self.remove_member(g, m, now)

    def tombstones(self, g: Group) -> list[rec.Key]:
        assert g.share is not None
        keys: list[rec.Key] = [k for mid in g.share.members for k in rec.share_member_keys(g.group_id, mid)]
        return keys + list(rec.share_group_keys(g.group_id))

    def resume(self, g: Group, now: Now) -> None:
        """A group read back from its records: each member must heartbeat within a session from now."""
        assert g.share is not None
        for mid in g.share.members:
            self.t.timers.schedule((SESSION, g.group_id, mid), now.mono + self.t.settings.share_session_timeout_ms)
        g.subscribed_topics = frozenset(g.share.subscription_metadata)
        g.protocol_type = SHARE_PROTOCOL_TYPE
        g.state = STABLE if g.share.members else EMPTY

    # ---- describe ----------------------------------------------------------------------------
    def describe(self, group_id: str) -> tuple[int, ShareGroupSummary | None]:
        err = self.t.coordinator_error(group_id) if group_id else E.INVALID_GROUP_ID
        if err:
            return err, None
        g = self.t.groups.get(group_id)
        if g is None or g.share is None:
            return E.GROUP_ID_NOT_FOUND, None
        sg = g.share
        names = {tid: n for n, (tid, _) in self._topics().items()}
        return 0, ShareGroupSummary(group_id, sg.state(), sg.group_epoch, sg.assignment_epoch,
                                    tuple(sg.members.values()), names)

    def _write(self, g: Group, key: rec.ConsumerKey, value: cr._Record) -> None:
        self.t.write(g.partition, key, rec.encode_consumer_value(value))


def _convertible(g: Group | None) -> bool:
    """A group id may become a share group if nothing else has it: no group, or an empty classic
    group without offsets (Kafka answers GROUP_ID_NOT_FOUND for any other kind)."""
    return g is None or (g.consumer is None and not g.members and not g.offsets and not g.txn_pending)


def _invalid(req: ShareHeartbeat) -> HeartbeatResult | None:
    """Kafka's request checks (INVALID_REQUEST)."""
    def bad(message: str) -> HeartbeatResult:
        return HeartbeatResult(E.INVALID_REQUEST, message)

    if not req.group_id:
        return bad("GroupId can't be empty.")
    if req.rack_id == "":
        return bad("RackId can't be empty.")
    if req.member_epoch == 0:
        if not req.subscribed_topic_names:
            return bad("SubscribedTopicNames must be set in first request.")
    elif req.member_epoch > 0 or req.member_epoch == LEAVE_EPOCH:
        if not req.member_id:
            return bad("MemberId can't be empty.")
    else:
        return bad(f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -1.")
    return None


def _metadata_of(m: ShareMember) -> cr.ShareGroupMemberMetadataValue:
    return cr.ShareGroupMemberMetadataValue(rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                                            subscribed_topic_names=list(m.subscribed_topic_names))


# ---- reading a share group back from its records ----------------------------------------------
@dataclass(slots=True)
class ShareLoad:
    epoch: int | None = None  # None: no ShareGroupMetadata record (or its tombstone)
    assignment_epoch: int = 0
    members: dict[str, cr.ShareGroupMemberMetadataValue] = field(default_factory=dict)
    targets: dict[str, Assignment] = field(default_factory=dict)
    current: dict[str, cr.ShareGroupCurrentMemberAssignmentValue] = field(default_factory=dict)


def load_record(groups: dict[str, ShareLoad], key: rec.ConsumerKey, value: bytes | None) -> None:
    """Replay one record: the last of each key wins, a tombstone removes."""
    ld = groups.setdefault(key.group, ShareLoad())
    v = None if value is None else rec.decode_consumer_value(key.kind, value)
    if key.kind == rec.SHARE_GROUP:
        ld.epoch = v.epoch if isinstance(v, cr.ShareGroupMetadataValue) else None
    elif key.kind == rec.SHARE_TARGET:
        ld.assignment_epoch = v.assignment_epoch if isinstance(v, cr.ShareGroupTargetAssignmentMetadataValue) else 0
    elif key.kind == rec.SHARE_MEMBER:
        put_or_drop(ld.members, key.member, v if isinstance(v, cr.ShareGroupMemberMetadataValue) else None)
    elif key.kind == rec.SHARE_TARGET_MEMBER:
        put_or_drop(ld.targets, key.member, from_topic_partitions(v.topic_partitions)
             if isinstance(v, cr.ShareGroupTargetAssignmentMemberValue) else None)
    elif key.kind == rec.SHARE_CURRENT:
        put_or_drop(ld.current, key.member, v if isinstance(v, cr.ShareGroupCurrentMemberAssignmentValue) else None)


def build(ld: ShareLoad, topics: Mapping[str, TopicMeta]) -> ShareGroupData | None:
    """The group its records describe; None if they say it is gone."""
    if ld.epoch is None:
        return None
    sg = ShareGroupData(group_epoch=ld.epoch, assignment_epoch=ld.assignment_epoch)
    for mid, mv in ld.members.items():
        m = ShareMember(mid, mv.rack_id, mv.client_id, mv.client_host, tuple(mv.subscribed_topic_names))
        cur = ld.current.get(mid)
        if cur is not None:
            m.member_epoch, m.previous_member_epoch = cur.member_epoch, cur.previous_member_epoch
            m.assigned = from_topic_partitions(cur.assigned_partitions)
        sg.members[mid] = m
        sg.target[mid] = ld.targets.get(mid, frozenset())
    names = {n for m in sg.members.values() for n in m.subscribed_topic_names}
    sg.subscription_metadata = {n: topics[n] for n in sorted(names) if n in topics}
    return sg
