"""Reading a KIP-848 consumer group back from its `__consumer_offsets` records: the last record of
each key wins, a tombstone removes, and what is left at the end of the partition is the group."""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.messages import coordinator_records as cr

from . import records as rec
from .assignors import Assignment
from .consumer import from_topic_partitions
from .consumer_model import ClassicMeta, ConsumerGroupData, ConsumerMember, MemberState


@dataclass(slots=True)
class ConsumerLoad:
    """One group's records as read so far."""

    epoch: int | None = None  # None: no ConsumerGroupMetadata record (or its tombstone)
    metadata: cr.ConsumerGroupPartitionMetadataValue | None = None
    assignment_epoch: int = 0
    members: dict[str, cr.ConsumerGroupMemberMetadataValue] = field(default_factory=dict)
    targets: dict[str, Assignment] = field(default_factory=dict)
    current: dict[str, cr.ConsumerGroupCurrentMemberAssignmentValue] = field(default_factory=dict)


def load_record(groups: dict[str, ConsumerLoad], key: rec.ConsumerKey, value: bytes | None) -> None:
    """Replay one record. Raises records.RecordFormatError for a value we cannot read."""
    ld = groups.setdefault(key.group, ConsumerLoad())
    v = None if value is None else rec.decode_consumer_value(key.kind, value)
    if key.kind == rec.CONSUMER_GROUP:
        ld.epoch = v.epoch if isinstance(v, cr.ConsumerGroupMetadataValue) else None
    elif key.kind == rec.CONSUMER_PARTITIONS:
        ld.metadata = v if isinstance(v, cr.ConsumerGroupPartitionMetadataValue) else None
    elif key.kind == rec.CONSUMER_TARGET:
        ld.assignment_epoch = v.assignment_epoch if isinstance(v, cr.ConsumerGroupTargetAssignmentMetadataValue) else 0
    elif key.kind == rec.CONSUMER_MEMBER:
        put_or_drop(ld.members, key.member, v if isinstance(v, cr.ConsumerGroupMemberMetadataValue) else None)
    elif key.kind == rec.CONSUMER_TARGET_MEMBER:
        put_or_drop(ld.targets, key.member, from_topic_partitions(v.topic_partitions)
             if isinstance(v, cr.ConsumerGroupTargetAssignmentMemberValue) else None)
    elif key.kind == rec.CONSUMER_CURRENT:
        put_or_drop(ld.current, key.member, v if isinstance(v, cr.ConsumerGroupCurrentMemberAssignmentValue) else None)


def put_or_drop(d: dict, k: str, v: object) -> None:  # type: ignore[type-arg]
    """A member's record replayed: the value kept, or (a tombstone) the member's entry dropped."""
    if v is None:
        d.pop(k, None)
    else:
        d[k] = v


def build(ld: ConsumerLoad) -> ConsumerGroupData | None:
    """The group the records describe; None if it has none left (deleted, or converted to classic)."""
    if ld.epoch is None:
        return None
    cg = ConsumerGroupData(group_epoch=ld.epoch, assignment_epoch=ld.assignment_epoch)
    if ld.metadata is not None:
        cg.subscription_metadata = {t.topic_name: (t.topic_id, t.num_partitions) for t in ld.metadata.topics}
    for mid, mv in ld.members.items():
        cur = ld.current.get(mid)
        m = ConsumerMember(mid, mv.instance_id, mv.rack_id, mv.client_id, mv.client_host,
                           tuple(mv.subscribed_topic_names), mv.subscribed_topic_regex, mv.server_assignor,
                           mv.rebalance_timeout_ms)
        cm = mv.classic_member_metadata
        if cm is not None:
            m.classic = ClassicMeta(cm.session_timeout_ms, tuple((p.name, p.metadata) for p in cm.supported_protocols))
        if cur is not None:
            m.member_epoch, m.previous_member_epoch = cur.member_epoch, cur.previous_member_epoch
            m.state = MemberState(cur.state) if cur.state in MemberState._value2member_map_ else MemberState.UNKNOWN
            m.assigned = from_topic_partitions(cur.assigned_partitions)
            m.pending_revocation = from_topic_partitions(cur.partitions_pending_revocation)
        cg.members[mid] = m
        if m.instance_id is not None:
            cg.static[m.instance_id] = mid
        cg.target[mid] = ld.targets.get(mid, frozenset())
    return cg
