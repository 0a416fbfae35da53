"""`__consumer_offsets` keys and values in Kafka's layout, mapped to the coordinator's dataclasses.

The schemas (OffsetCommitKey/Value, GroupMetadataKey/Value) are declared in
protocol/messages/coordinator_records.py with every other Kafka message; this module chooses the
versions Kafka 3.x/4.x write and turns them into the small dataclasses the group state machines use.
The key's version says what the record is: 0 or 1 an offset commit, 2 a classic group's metadata,
3 to 8 the records of a KIP-848 consumer group and 10 to 14 those of a KIP-932 share group (ConsumerKey;
their values are the schema objects themselves, read and written by consumer.py and share.py). A record with a null value is a tombstone (the offset
or group is gone; compaction may drop the key).

Versions written, as Kafka's group coordinator chooses them: offset key 1, offset value 3 (or 1
when the commit carries an explicit expire timestamp, which only v1 can hold), group key 2, group
value 3 (the version with static member ids). Every version Kafka ever wrote is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from protocol.messages import coordinator_records as cr
from protocol.messages.coordinator_records import (
    GROUP_METADATA_KEY_VERSION,
    OFFSET_COMMIT_KEY_VERSIONS,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    read_version,
    read_version_prefixed,
    version_prefixed,
)
from protocol.primitives import DecodeError

OFFSET_KEY_VERSION: Final = 1
OFFSET_VALUE_VERSION: Final = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY: Final = 1
GROUP_VALUE_VERSION: Final = 3


class RecordFormatError(ValueError):
    """A key or value we cannot read (unknown version, truncated): the loader logs and skips it."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # -1: expiry follows the broker's retention rule


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol_name: str | None
    leader: str | None
    state_timestamp: int
    members: tuple[MemberValue, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    """A consumer group's record: `kind` is the key version (CONSUMER_* below), `member` empty for the
    group-wide kinds."""

    kind: int
    group: str
    member: str = ""


CONSUMER_GROUP = cr.CONSUMER_GROUP_METADATA_KEY_VERSION
CONSUMER_PARTITIONS = cr.CONSUMER_GROUP_PARTITION_METADATA_KEY_VERSION
CONSUMER_MEMBER = cr.CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION
CONSUMER_TARGET = cr.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION
CONSUMER_TARGET_MEMBER = cr.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION
CONSUMER_CURRENT = cr.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION
# a KIP-932 share group's records take the same ConsumerKey, with these kinds
SHARE_MEMBER = cr.SHARE_GROUP_MEMBER_METADATA_KEY_VERSION
SHARE_GROUP = cr.SHARE_GROUP_METADATA_KEY_VERSION
SHARE_TARGET = cr.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION
SHARE_TARGET_MEMBER = cr.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION
SHARE_CURRENT = cr.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION
SHARE_KINDS = (SHARE_MEMBER, SHARE_GROUP, SHARE_TARGET, SHARE_TARGET_MEMBER, SHARE_CURRENT)
_CONSUMER_KEYS: dict[int, type[cr._Record]] = {
    CONSUMER_GROUP: cr.ConsumerGroupMetadataKey, CONSUMER_PARTITIONS: cr.ConsumerGroupPartitionMetadataKey,
    CONSUMER_MEMBER: cr.ConsumerGroupMemberMetadataKey, CONSUMER_TARGET: cr.ConsumerGroupTargetAssignmentMetadataKey,
    CONSUMER_TARGET_MEMBER: cr.ConsumerGroupTargetAssignmentMemberKey,
    CONSUMER_CURRENT: cr.ConsumerGroupCurrentMemberAssignmentKey,
    SHARE_MEMBER: cr.ShareGroupMemberMetadataKey, SHARE_GROUP: cr.ShareGroupMetadataKey,
    SHARE_TARGET: cr.ShareGroupTargetAssignmentMetadataKey, SHARE_TARGET_MEMBER: cr.ShareGroupTargetAssignmentMemberKey,
    SHARE_CURRENT: cr.ShareGroupCurrentMemberAssignmentKey,
}
_MEMBER_KINDS = (CONSUMER_MEMBER, CONSUMER_TARGET_MEMBER, CONSUMER_CURRENT, SHARE_MEMBER, SHARE_TARGET_MEMBER,
                 SHARE_CURRENT)
CONSUMER_VALUES: dict[int, type[cr._Record]] = {
    CONSUMER_GROUP: cr.ConsumerGroupMetadataValue, CONSUMER_PARTITIONS: cr.ConsumerGroupPartitionMetadataValue,
    CONSUMER_MEMBER: cr.ConsumerGroupMemberMetadataValue,
    CONSUMER_TARGET: cr.ConsumerGroupTargetAssignmentMetadataValue,
    CONSUMER_TARGET_MEMBER: cr.ConsumerGroupTargetAssignmentMemberValue,
    CONSUMER_CURRENT: cr.ConsumerGroupCurrentMemberAssignmentValue,
    SHARE_MEMBER: cr.ShareGroupMemberMetadataValue, SHARE_GROUP: cr.ShareGroupMetadataValue,
    SHARE_TARGET: cr.ShareGroupTargetAssignmentMetadataValue,
    SHARE_TARGET_MEMBER: cr.ShareGroupTargetAssignmentMemberValue,
    SHARE_CURRENT: cr.ShareGroupCurrentMemberAssignmentValue,
}
CONSUMER_VALUE_VERSION: Final = 0


def consumer_group_keys(group: str) -> list[ConsumerKey]:
    """The group-wide records of a consumer group, in the order Kafka tombstones them when the
    group goes (its members' records go first, as each member leaves)."""
    return [ConsumerKey(CONSUMER_TARGET, group), ConsumerKey(CONSUMER_PARTITIONS, group),
            ConsumerKey(CONSUMER_GROUP, group)]


def consumer_member_keys(group: str, member: str) -> list[ConsumerKey]:
    """A member's records, in the order Kafka tombstones them when it leaves."""
    return [ConsumerKey(CONSUMER_CURRENT, group, member), ConsumerKey(CONSUMER_TARGET_MEMBER, group, member),
            ConsumerKey(CONSUMER_MEMBER, group, member)]


def share_group_keys(group: str) -> list[ConsumerKey]:
    """The group-wide records of a share group, in the order they are tombstoned when it goes."""
    return [ConsumerKey(SHARE_TARGET, group), ConsumerKey(SHARE_GROUP, group)]


def share_member_keys(group: str, member: str) -> list[ConsumerKey]:
    """A share group member's records, in the order they are tombstoned when it leaves."""
    return [ConsumerKey(SHARE_CURRENT, group, member), ConsumerKey(SHARE_TARGET_MEMBER, group, member),
            ConsumerKey(SHARE_MEMBER, group, member)]


def encode_consumer_value(value: cr._Record) -> bytes:
    return version_prefixed(value, CONSUMER_VALUE_VERSION)


def decode_consumer_value(kind: int, data: bytes) -> cr._Record:
    try:
        return read_version_prefixed(CONSUMER_VALUES[kind], data)[1]
    except (DecodeError, UnicodeDecodeError) as e:
        raise RecordFormatError(f"malformed consumer group record (key version {kind}): {e}") from e


Key = OffsetKey | GroupKey | ConsumerKey


def encode_key(key: Key) -> bytes:
    if isinstance(key, OffsetKey):
        return version_prefixed(OffsetCommitKey(group=key.group, topic=key.topic, partition=key.partition),
                                OFFSET_KEY_VERSION)
    if isinstance(key, ConsumerKey):
        cls = _CONSUMER_KEYS[key.kind]
        fields = {"group_id": key.group, "member_id": key.member} if key.kind in _MEMBER_KINDS else {"group_id": key.group}
        return version_prefixed(cls(**fields), key.kind)
    return version_prefixed(GroupMetadataKey(group=key.group), GROUP_METADATA_KEY_VERSION)


def decode_key(data: bytes) -> Key:
    try:
        version = read_version(data)
        if version in OFFSET_COMMIT_KEY_VERSIONS:
            k = read_version_prefixed(OffsetCommitKey, data)[1]
            return OffsetKey(_text(k.group), _text(k.topic), k.partition)
        if version == GROUP_METADATA_KEY_VERSION:
            return GroupKey(_text(read_version_prefixed(GroupMetadataKey, data)[1].group))
        if version in _CONSUMER_KEYS:
            ck = read_version_prefixed(_CONSUMER_KEYS[version], data)[1]
            return ConsumerKey(version, _text(getattr(ck, "group_id", None)), _text(getattr(ck, "member_id", "")))
    except (DecodeError, UnicodeDecodeError) as e:
        raise RecordFormatError(f"malformed key: {e}") from e
    raise RecordFormatError(f"unknown key version {version} (9, 15+: records Ketch does not write)")


def encode_offset_value(v: OffsetValue) -> bytes:
    version = OFFSET_VALUE_VERSION if v.expire_timestamp == -1 else OFFSET_VALUE_VERSION_WITH_EXPIRY
    return version_prefixed(OffsetCommitValue(
        offset=v.offset, leader_epoch=v.leader_epoch, metadata=v.metadata,
        commit_timestamp=v.commit_timestamp, expire_timestamp=v.expire_timestamp), version)


def decode_offset_value(data: bytes) -> OffsetValue:
    try:
        _, v = read_version_prefixed(OffsetCommitValue, data)
    except (DecodeError, UnicodeDecodeError) as e:
        raise RecordFormatError(f"malformed offset value: {e}") from e
    return OffsetValue(v.offset, v.leader_epoch, v.metadata or "", v.commit_timestamp, v.expire_timestamp)


def encode_group_value(v: GroupValue) -> bytes:
    return version_prefixed(GroupMetadataValue(
        protocol_type=v.protocol_type, generation=v.generation, protocol=v.protocol_name, leader=v.leader,
        current_state_timestamp=v.state_timestamp,
        members=[MemberMetadata(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
            session_timeout=m.session_timeout_ms, subscription=m.subscription, assignment=m.assignment)
            for m in v.members]), GROUP_VALUE_VERSION)


def decode_group_value(data: bytes) -> GroupValue:
    try:
        version, v = read_version_prefixed(GroupMetadataValue, data)
    except (DecodeError, UnicodeDecodeError) as e:
        raise RecordFormatError(f"malformed group value: {e}") from e
    members = tuple(
        MemberValue(_text(m.member_id), m.group_instance_id, _text(m.client_id), _text(m.client_host),
                    # v0 has no rebalance timeout: Kafka's loader takes the session timeout for it
                    m.rebalance_timeout if version >= 1 else m.session_timeout, m.session_timeout,
                    bytes(m.subscription or b""), bytes(m.assignment or b""))
        for m in v.members or ())
    return GroupValue(_text(v.protocol_type), v.generation, v.protocol, v.leader, v.current_state_timestamp,
                      members)


def _text(s: str | None) -> str:
    """A non-nullable string that arrived as null (length -1) is damage, not an empty name."""
    if s is None:
        raise RecordFormatError("null where Kafka's layout has a non-null string")
    return s
