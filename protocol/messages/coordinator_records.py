"""Records of the internal topics, `__consumer_offsets` and `__transaction_state`, as Kafka writes them.

These are not API messages but Kafka declares them the same way (OffsetCommitKey.json,
OffsetCommitValue.json, GroupMetadataKey.json, GroupMetadataValue.json in the group coordinator,
TransactionLogKey.json and TransactionLogValue.json in the transaction coordinator), so they are
declared here like every other schema and share its codec. Lag monitors, offset exporters and
Kafka's own dump tools read these topics directly; keeping Kafka's layout is what lets them.

On disk, a key and a value are each an int16 version followed by the struct at that version
(`version_prefixed` / `read_version_prefixed`). The key's version tells the kind of record in
`__consumer_offsets`: 0 and 1 an offset commit, 2 a classic group's metadata, 3 to 8 the records of
a KIP-848 consumer group (ConsumerGroupMetadata, ConsumerGroupPartitionMetadata,
ConsumerGroupMemberMetadata, ConsumerGroupTargetAssignmentMetadata, ConsumerGroupTargetAssignmentMember,
ConsumerGroupCurrentMemberAssignment, from Kafka's group-coordinator message definitions), 10 to 14
those of a KIP-932 share group (ShareGroupMemberMetadata, ShareGroupMetadata,
ShareGroupTargetAssignmentMetadata, ShareGroupTargetAssignmentMember, ShareGroupCurrentMemberAssignment).
A null value is a tombstone.
"""

from __future__ import annotations

import uuid
from typing import TypeVar

from ..primitives import DecodeError, Reader, Writer
from ..schema import (
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    Array,
    Message,
    NullableStruct,
    Struct,
    f,
    schema,
)

# __consumer_offsets key versions (the kind of record).
OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
GROUP_METADATA_KEY_VERSION = 2
CONSUMER_GROUP_METADATA_KEY_VERSION = 3
CONSUMER_GROUP_PARTITION_METADATA_KEY_VERSION = 4
CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION = 8
SHARE_GROUP_MEMBER_METADATA_KEY_VERSION = 10
SHARE_GROUP_METADATA_KEY_VERSION = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION = 14

M = TypeVar("M", bound=Message)


class _Record(Message):
    """A record body: no API key; VERSIONS and FLEXIBLE as in Kafka's definition."""

    __slots__ = ()
    API_KEY = -1


@schema
class OffsetCommitKey(_Record):
    VERSIONS = (0, 1)
    FLEXIBLE = None
    group: str = f(STRING)
    topic: str = f(STRING)
    partition: int = f(INT32)


@schema
class OffsetCommitValue(_Record):
    """Kafka 3.x/4.x write version 3, or 1 when the commit carries an expire timestamp."""

    VERSIONS = (0, 4)
    FLEXIBLE = 4
    offset: int = f(INT64)
    leader_epoch: int = f(INT32, "3+", default=-1)
    metadata: str = f(STRING)
    commit_timestamp: int = f(INT64)
    expire_timestamp: int = f(INT64, "1", default=-1)


@schema
class GroupMetadataKey(_Record):
    VERSIONS = (2, 2)
    FLEXIBLE = None
    group: str = f(STRING, "2")


@schema
class MemberMetadata(Struct):
    member_id: str = f(STRING)
    group_instance_id: str | None = f(STRING, "3+", default=None)
    client_id: str = f(STRING)
    client_host: str = f(STRING)
    rebalance_timeout: int = f(INT32, "1+", default=-1)
    session_timeout: int = f(INT32)
    subscription: bytes = f(BYTES)
    assignment: bytes = f(BYTES)


@schema
class GroupMetadataValue(_Record):
    """Version 3 (static member ids) is what Kafka 2.3 to 4.x write."""

    VERSIONS = (0, 4)
    FLEXIBLE = 4
    protocol_type: str = f(STRING)
    generation: int = f(INT32)
    protocol: str | None = f(STRING, default=None)
    leader: str | None = f(STRING, default=None)
    current_state_timestamp: int = f(INT64, "2+", default=-1)
    members: list[MemberMetadata] = f(Array(MemberMetadata))


@schema
class TransactionLogKey(_Record):
    VERSIONS = (0, 0)
    FLEXIBLE = None
    transactional_id: str = f(STRING, "0")


@schema
class TxnPartitions(Struct):
    topic: str = f(STRING)
    partition_ids: list[int] = f(Array(INT32))


@schema
class TransactionLogValue(_Record):
    """Version 0, or 1 (flexible) when a KIP-890 or KIP-939 field differs from its default — as
    Kafka writes 1 once transaction.version 1+ is in use. `transaction_partitions` is null in Empty.
    `next_producer_epoch` (tag 3) is KIP-939's: the epoch of the instance that took over an ongoing
    two-phase-commit transaction, whose own id and epoch stay in producer_id / producer_epoch."""

    VERSIONS = (0, 1)
    FLEXIBLE = 1
    producer_id: int = f(INT64)
    previous_producer_id: int = f(INT64, "none", tag=0, tagged="1+", default=-1)
    next_producer_id: int = f(INT64, "none", tag=1, tagged="1+", default=-1)
    producer_epoch: int = f(INT16)
    transaction_timeout_ms: int = f(INT32)
    transaction_status: int = f(INT8)
    transaction_partitions: list[TxnPartitions] | None = f(Array(TxnPartitions), default=None)
    transaction_last_update_timestamp_ms: int = f(INT64)
    transaction_start_timestamp_ms: int = f(INT64)
    client_transaction_version: int = f(INT16, "none", tag=2, tagged="1+", default=0)
    next_producer_epoch: int = f(INT16, "none", tag=3, tagged="1+", default=-1)


# ---- KIP-848 consumer groups: keys (the group, or the group and a member) and values (all version 0)


@schema
class ConsumerGroupMetadataKey(_Record):
    VERSIONS = (3, 3)
    FLEXIBLE = None
    group_id: str = f(STRING, "3")


@schema
class ConsumerGroupPartitionMetadataKey(_Record):
    VERSIONS = (4, 4)
    FLEXIBLE = None
    group_id: str = f(STRING, "4")


@schema
class ConsumerGroupMemberMetadataKey(_Record):
    VERSIONS = (5, 5)
    FLEXIBLE = None
    group_id: str = f(STRING, "5")
    member_id: str = f(STRING, "5")


@schema
class ConsumerGroupTargetAssignmentMetadataKey(_Record):
    VERSIONS = (6, 6)
    FLEXIBLE = None
    group_id: str = f(STRING, "6")


@schema
class ConsumerGroupTargetAssignmentMemberKey(_Record):
    VERSIONS = (7, 7)
    FLEXIBLE = None
    group_id: str = f(STRING, "7")
    member_id: str = f(STRING, "7")


@schema
class ConsumerGroupCurrentMemberAssignmentKey(_Record):
    VERSIONS = (8, 8)
    FLEXIBLE = None
    group_id: str = f(STRING, "8")
    member_id: str = f(STRING, "8")


@schema
class ConsumerGroupMetadataValue(_Record):
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    epoch: int = f(INT32)


@schema
class PartitionRacks(Struct):
    partition: int = f(INT32)
    racks: list[str] = f(Array(STRING))


@schema
class TopicMetadata(Struct):
    topic_id: uuid.UUID = f(UUID)
    topic_name: str = f(STRING)
    num_partitions: int = f(INT32)
    partition_metadata: list[PartitionRacks] = f(Array(PartitionRacks))


@schema
class ConsumerGroupPartitionMetadataValue(_Record):
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    topics: list[TopicMetadata] = f(Array(TopicMetadata))


@schema
class ClassicProtocol(Struct):
    name: str = f(STRING)
    metadata: bytes = f(BYTES)


@schema
class ClassicMemberMetadata(Struct):
    session_timeout_ms: int = f(INT32)
    supported_protocols: list[ClassicProtocol] = f(Array(ClassicProtocol))


@schema
class ConsumerGroupMemberMetadataValue(_Record):
    """ClassicMemberMetadata (tag 0) is for classic members of a consumer group (online upgrade),
    which Ketch does not have: read and ignored."""

    VERSIONS = (0, 0)
    FLEXIBLE = 0
    instance_id: str | None = f(STRING, default=None)
    rack_id: str | None = f(STRING, default=None)
    client_id: str = f(STRING)
    client_host: str = f(STRING)
    subscribed_topic_names: list[str] = f(Array(STRING))
    subscribed_topic_regex: str | None = f(STRING, default=None)
    rebalance_timeout_ms: int = f(INT32, default=-1)
    server_assignor: str | None = f(STRING, default=None)
    classic_member_metadata: ClassicMemberMetadata | None = f(NullableStruct(ClassicMemberMetadata), "0+", tag=0,
                                                              tagged="0+", default=None)


@schema
class ConsumerTopicPartitions(Struct):
    topic_id: uuid.UUID = f(UUID)
    partitions: list[int] = f(Array(INT32))


@schema
class ConsumerGroupTargetAssignmentMetadataValue(_Record):
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    assignment_epoch: int = f(INT32)


@schema
class ConsumerGroupTargetAssignmentMemberValue(_Record):
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    topic_partitions: list[ConsumerTopicPartitions] = f(Array(ConsumerTopicPartitions))


@schema
class ConsumerGroupCurrentMemberAssignmentValue(_Record):
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    member_epoch: int = f(INT32)
    previous_member_epoch: int = f(INT32)
    state: int = f(INT8)
    assigned_partitions: list[ConsumerTopicPartitions] = f(Array(ConsumerTopicPartitions))
    partitions_pending_revocation: list[ConsumerTopicPartitions] = f(Array(ConsumerTopicPartitions))


# ---- KIP-932 share groups: keys and values (all version 0), Kafka's group-coordinator definitions


@schema
class ShareGroupMemberMetadataKey(_Record):
    VERSIONS = (10, 10)
    FLEXIBLE = None
    group_id: str = f(STRING, "10")
    member_id: str = f(STRING, "10")


@schema
class ShareGroupMetadataKey(_Record):
    VERSIONS = (11, 11)
    FLEXIBLE = None
    group_id: str = f(STRING, "11")


@schema
class ShareGroupTargetAssignmentMetadataKey(_Record):
    VERSIONS = (12, 12)
    FLEXIBLE = None
    group_id: str = f(STRING, "12")


@schema
class ShareGroupTargetAssignmentMemberKey(_Record):
    VERSIONS = (13, 13)
    FLEXIBLE = None
    group_id: str = f(STRING, "13")
    member_id: str = f(STRING, "13")


@schema
class ShareGroupCurrentMemberAssignmentKey(_Record):
    VERSIONS = (14, 14)
    FLEXIBLE = None
    group_id: str = f(STRING, "14")
    member_id: str = f(STRING, "14")


@schema
class ShareGroupMemberMetadataValue(_Record):
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    rack_id: str | None = f(STRING, default=None)
    client_id: str = f(STRING)
    client_host: str = f(STRING)
    subscribed_topic_names: list[str] = f(Array(STRING))


@schema
class ShareGroupMetadataValue(_Record):
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    epoch: int = f(INT32)


@schema
class ShareGroupTargetAssignmentMetadataValue(_Record):
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    assignment_epoch: int = f(INT32)


@schema
class ShareGroupTargetAssignmentMemberValue(_Record):
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    topic_partitions: list[ConsumerTopicPartitions] = f(Array(ConsumerTopicPartitions))


@schema
class ShareGroupCurrentMemberAssignmentValue(_Record):
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    member_epoch: int = f(INT32)
    previous_member_epoch: int = f(INT32)
    state: int = f(INT8)
    assigned_partitions: list[ConsumerTopicPartitions] = f(Array(ConsumerTopicPartitions))


# ---- `__share_group_state`: the share coordinator's records (ShareSnapshotKey/Value, key version 0)


SHARE_SNAPSHOT_KEY_VERSION = 0


@schema
class ShareSnapshotKey(_Record):
    VERSIONS = (0, 0)
    FLEXIBLE = None
    group_id: str = f(STRING, "0")
    topic_id: uuid.UUID = f(UUID, "0")
    partition: int = f(INT32, "0")


@schema
class ShareStateBatch(Struct):
    first_offset: int = f(INT64)
    last_offset: int = f(INT64)
    delivery_state: int = f(INT8)
    delivery_count: int = f(INT16)


@schema
class ShareSnapshotValue(_Record):
    """The whole state of one share-partition: Ketch writes a snapshot every time (no ShareUpdate
    records), so the last record of a key is its state and compaction keeps just that."""

    VERSIONS = (0, 0)
    FLEXIBLE = 0
    snapshot_epoch: int = f(INT32)
    state_epoch: int = f(INT32)
    leader_epoch: int = f(INT32)
    start_offset: int = f(INT64)
    create_timestamp: int = f(INT64, default=-1)
    write_timestamp: int = f(INT64, default=-1)
    state_batches: list[ShareStateBatch] = f(Array(ShareStateBatch))


def version_prefixed(msg: Message, version: int) -> bytes:
    """The bytes Kafka stores: int16 version, then the struct at that version."""
    lo, hi = msg.VERSIONS
    if not lo <= version <= hi:
        raise ValueError(f"{type(msg).__name__} has no version {version}")
    w = Writer()
    w.int16(version)
    msg.write(w, version)
    return w.getvalue()


def read_version(data: bytes | memoryview) -> int:
    if len(data) < 2:
        raise DecodeError(f"record of {len(data)} bytes has no version")
    return int.from_bytes(data[:2], "big", signed=True)


def read_version_prefixed(cls: type[M], data: bytes | memoryview) -> tuple[int, M]:
    """(version, struct); DecodeError for a version `cls` does not have, or bytes left over."""
    version = read_version(data)
    lo, hi = cls.VERSIONS
    if not lo <= version <= hi:
        raise DecodeError(f"{cls.__name__} version {version} is unknown (known: {lo}-{hi})")
    r = Reader(data, 2)
    msg = cls.read(r, version)
    if r.remaining():
        raise DecodeError(f"{cls.__name__} v{version}: {r.remaining()} bytes after the record")
    return version, msg
