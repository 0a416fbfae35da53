"""Records of the metadata log (`__cluster_metadata`), in Kafka's framing.

Kafka declares them like API messages (metadata/src/main/resources/common/metadata/*.json) and
writes each as a record value: unsigned varint frame version (1), unsigned varint record type,
unsigned varint record version, then the record in the flexible encoding. Declared here with the
shared codec; `frame` and `unframe` do the wrapping. Only the record types Ketch writes so far are
declared; an unknown type is a DecodeError, which the broker logs without applying anything.
"""

from __future__ import annotations

import uuid

from ..primitives import DecodeError, Reader, Writer
from ..schema import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    UUID,
    Array,
    Message,
    Struct,
    f,
    schema,
)

FRAME_VERSION = 1


class _MetadataRecord(Message):
    __slots__ = ()
    API_KEY = -1
    RECORD_TYPE = -1


@schema
class ProducerIdsRecord(_MetadataRecord):
    """A block of producer ids handed to a broker: ids below `next_producer_id` are taken."""

    RECORD_TYPE = 15
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    broker_id: int = f(INT32)
    broker_epoch: int = f(INT64, default=-1)
    next_producer_id: int = f(INT64)


@schema
class BrokerEndpoint(Struct):
    name: str = f(STRING)
    host: str = f(STRING)
    port: int = f(UINT16)
    security_protocol: int = f(INT16)


@schema
class BrokerFeature(Struct):
    name: str = f(STRING)
    min_supported_version: int = f(INT16)
    max_supported_version: int = f(INT16)


@schema
class RegisterBrokerRecord(_MetadataRecord):
    """A broker joined (or rejoined with a new incarnation); it starts fenced. Ketch writes v1."""

    RECORD_TYPE = 0
    VERSIONS = (0, 3)
    FLEXIBLE = 0
    broker_id: int = f(INT32)
    is_migrating_zk_broker: bool = f(BOOL, "2+")
    incarnation_id: uuid.UUID = f(UUID)
    broker_epoch: int = f(INT64)
    end_points: list[BrokerEndpoint] = f(Array(BrokerEndpoint))
    features: list[BrokerFeature] = f(Array(BrokerFeature))
    rack: str | None = f(STRING, default=None)
    fenced: bool = f(BOOL, default=True)
    in_controlled_shutdown: bool = f(BOOL, "1+")
    log_dirs: list[uuid.UUID] = f(Array(UUID), "3+", tag=0, tagged="3+")


@schema
class FenceBrokerRecord(_MetadataRecord):
    """The broker missed its heartbeats (or asked to be fenced): it may lead nothing."""

    RECORD_TYPE = 7
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    id: int = f(INT32)
    epoch: int = f(INT64)


@schema
class UnfenceBrokerRecord(_MetadataRecord):
    """The broker caught up with the metadata log and heartbeats: it may lead again."""

    RECORD_TYPE = 8
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    id: int = f(INT32)
    epoch: int = f(INT64)


@schema
class BrokerRegistrationChangeRecord(_MetadataRecord):
    """A registered broker's state changed; Ketch writes it for controlled shutdown (v1's
    InControlledShutdown = 1: the broker asked to stop, its leaderships are being moved away)."""

    RECORD_TYPE = 17
    VERSIONS = (0, 2)
    FLEXIBLE = 0
    broker_id: int = f(INT32)
    broker_epoch: int = f(INT64)
    fenced: int = f(INT8, tag=0, tagged="0+")  # -1 unfence, 0 unchanged, 1 fence
    in_controlled_shutdown: int = f(INT8, "1+", tag=1, tagged="1+")  # 0 unchanged, 1 shutting down
    log_dirs: list[uuid.UUID] = f(Array(UUID), "2+", tag=2, tagged="2+")


@schema
class TopicRecord(_MetadataRecord):
    """A topic was created: its name and the id every partition record refers to it by."""

    RECORD_TYPE = 2
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    name: str = f(STRING)
    topic_id: uuid.UUID = f(UUID)


@schema
class PartitionRecord(_MetadataRecord):
    """A partition's whole state as the controller created it. Ketch writes v0."""

    RECORD_TYPE = 3
    VERSIONS = (0, 2)
    FLEXIBLE = 0
    partition_id: int = f(INT32, default=-1)
    topic_id: uuid.UUID = f(UUID)
    replicas: list[int] = f(Array(INT32))
    isr: list[int] = f(Array(INT32))
    removing_replicas: list[int] = f(Array(INT32))
    adding_replicas: list[int] = f(Array(INT32))
    leader: int = f(INT32, default=-1)
    leader_recovery_state: int = f(INT8, tag=0, tagged="0+")
    leader_epoch: int = f(INT32, default=-1)
    partition_epoch: int = f(INT32, default=-1)
    directories: list[uuid.UUID] = f(Array(UUID), "1+")
    eligible_leader_replicas: list[int] | None = f(Array(INT32), "2+", default=None, tag=1, tagged="2+")
    last_known_elr: list[int] | None = f(Array(INT32), "2+", default=None, tag=2, tagged="2+")


NO_LEADER_CHANGE = -2


@schema
class PartitionChangeRecord(_MetadataRecord):
    """A change to a partition (every field tagged; absent = unchanged). The partition epoch
    bumps with every change, the leader epoch whenever `leader` is present. Ketch writes v0."""

    RECORD_TYPE = 5
    VERSIONS = (0, 2)
    FLEXIBLE = 0
    partition_id: int = f(INT32, default=-1)
    topic_id: uuid.UUID = f(UUID)
    isr: list[int] | None = f(Array(INT32), default=None, tag=0, tagged="0+")
    leader: int = f(INT32, default=NO_LEADER_CHANGE, tag=1, tagged="0+")
    replicas: list[int] | None = f(Array(INT32), default=None, tag=2, tagged="0+")
    removing_replicas: list[int] | None = f(Array(INT32), default=None, tag=3, tagged="0+")
    adding_replicas: list[int] | None = f(Array(INT32), default=None, tag=4, tagged="0+")
    leader_recovery_state: int = f(INT8, default=-1, tag=5, tagged="0+")
    directories: list[uuid.UUID] | None = f(Array(UUID), "1+", default=None, tag=8, tagged="1+")
    eligible_leader_replicas: list[int] | None = f(Array(INT32), "2+", default=None, tag=6, tagged="2+")
    last_known_elr: list[int] | None = f(Array(INT32), "2+", default=None, tag=7, tagged="2+")


TOPIC_RESOURCE = 2  # ConfigResource type of a topic
BROKER_RESOURCE = 4  # ... of a broker: name "" is the cluster-wide default, else the broker's id


@schema
class ConfigRecord(_MetadataRecord):
    """A config was set (value) or removed (null) on a resource: a topic, or a broker (dynamic
    broker configs: name "" for the cluster-wide default, a node id for one broker)."""

    RECORD_TYPE = 4
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    resource_type: int = f(INT8)
    resource_name: str = f(STRING)
    name: str = f(STRING)
    value: str | None = f(STRING, default=None)


@schema
class RemoveTopicRecord(_MetadataRecord):
    """A topic was deleted, with its partitions and configs."""

    RECORD_TYPE = 9
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    topic_id: uuid.UUID = f(UUID)


@schema
class NoOpRecord(_MetadataRecord):
    """Written by an idle quorum leader every quarter of the fetch timeout (KIP-835), so the
    voters keep confirming fresh entries and its lease stays current (broker/quorum/lease.py)."""

    RECORD_TYPE = 20
    VERSIONS = (0, 0)
    FLEXIBLE = 0


@schema
class AccessControlEntryRecord(_MetadataRecord):
    """An ACL binding was created (protocol/acl.py); `id` is what removes it."""

    RECORD_TYPE = 18
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    id: uuid.UUID = f(UUID)
    resource_type: int = f(INT8)
    resource_name: str = f(STRING)
    pattern_type: int = f(INT8)
    principal: str = f(STRING)
    host: str = f(STRING)
    operation: int = f(INT8)
    permission_type: int = f(INT8)


@schema
class RemoveAccessControlEntryRecord(_MetadataRecord):
    """The ACL binding with this id was deleted."""

    RECORD_TYPE = 19
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    id: uuid.UUID = f(UUID)


@schema
class UserScramCredentialRecord(_MetadataRecord):
    """A user's SCRAM credential for one mechanism (1: SCRAM-SHA-256, 2: SCRAM-SHA-512), set or
    replaced: the keys RFC 5802 derives from the salted password, never the password itself."""

    RECORD_TYPE = 11
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    name: str = f(STRING)
    mechanism: int = f(INT8)
    salt: bytes = f(BYTES)
    stored_key: bytes = f(BYTES)
    server_key: bytes = f(BYTES)
    iterations: int = f(INT32)


@schema
class RemoveUserScramCredentialRecord(_MetadataRecord):
    """A user's SCRAM credential for one mechanism was deleted."""

    RECORD_TYPE = 22
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    name: str = f(STRING)
    mechanism: int = f(INT8)


RECORD_TYPES: dict[int, type[_MetadataRecord]] = {
    cls.RECORD_TYPE: cls for cls in (ProducerIdsRecord, RegisterBrokerRecord, FenceBrokerRecord, UnfenceBrokerRecord,
                                     BrokerRegistrationChangeRecord, TopicRecord, PartitionRecord,
                                     PartitionChangeRecord, ConfigRecord, RemoveTopicRecord, NoOpRecord,
                                     AccessControlEntryRecord, RemoveAccessControlEntryRecord,
                                     UserScramCredentialRecord, RemoveUserScramCredentialRecord)}


def frame(record: _MetadataRecord, version: int = 0) -> bytes:
    w = Writer()
    w.uvarint(FRAME_VERSION)
    w.uvarint(record.RECORD_TYPE)
    w.uvarint(version)
    record.write(w, version)
    return w.getvalue()


def unframe(data: bytes) -> _MetadataRecord:
    r = Reader(data)
    frame_version = r.uvarint()
    if frame_version != FRAME_VERSION:
        raise DecodeError(f"metadata record frame version {frame_version} (only {FRAME_VERSION} is known)")
    record_type, version = r.uvarint(), r.uvarint()
    cls = RECORD_TYPES.get(record_type)
    if cls is None:
        raise DecodeError(f"unknown metadata record type {record_type}")
    lo, hi = cls.VERSIONS
    if not lo <= version <= hi:
        raise DecodeError(f"{cls.__name__} version {version} is unknown (known: {lo}-{hi})")
    msg = cls.read(r, version)
    if r.remaining():
        raise DecodeError(f"{cls.__name__}: {r.remaining()} bytes after the record")
    return msg


BATCH_MARKER = 0  # never a frame version: an entry that starts with it holds several records


def frame_batch(records: list[bytes]) -> bytes:
    """Several framed records as one metadata-log entry, committed (and applied) together — as
    Kafka's controller writes a topic and its partitions in one atomic record batch. One record
    stays a bare frame, so entries written before batching read the same."""
    if len(records) == 1:
        return records[0]
    w = Writer()
    w.uvarint(BATCH_MARKER)
    w.uvarint(len(records))
    for r in records:
        w.uvarint(len(r))
        w.raw(r)
    return w.getvalue()


def unframe_batch(data: bytes) -> list[_MetadataRecord]:
    """The records of one entry; DecodeError if any of them cannot be read."""
    if not data or data[0] != BATCH_MARKER:
        return [unframe(data)]
    r = Reader(data)
    r.uvarint()
    out = []
    for _ in range(r.uvarint()):
        n = r.uvarint()
        if n > r.remaining():
            raise DecodeError(f"metadata record of {n} bytes in {r.remaining()}")
        out.append(unframe(r.raw(n)))
    if r.remaining():
        raise DecodeError(f"{r.remaining()} bytes after the records of a metadata entry")
    return out
