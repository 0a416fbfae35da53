"""Keys and values of `__consumer_offsets`: our own binary layout (docs/groups.md), via construct.

The topic is compacted, so a key must name exactly the thing its value replaces: one key per
(group, topic, partition) offset and one per group's metadata. The first int16 of a key says which
kind it is (and leaves room for new kinds); the first int16 of a value is its layout version so a
later broker can read what an older one wrote. A record with a null value is a tombstone: the
thing its key names is gone (and compaction may drop the key for good).

Integers are big-endian; strings are int16-length-prefixed UTF-8; a nullable string is a presence
byte (0/1) then the string; byte blobs are int32-length-prefixed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import construct as cs

OFFSET_KEY_VERSION: Final = 1
GROUP_KEY_VERSION: Final = 2
OFFSET_VALUE_VERSION: Final = 0
GROUP_VALUE_VERSION: Final = 0

_Str = cs.PascalString(cs.Int16ub, "utf8")
_Bytes = cs.Prefixed(cs.Int32ub, cs.GreedyBytes)


class _Nullable(cs.Adapter):  # type: ignore[misc]
    """A presence byte then the value: None <-> absent. Kafka's own layouts use length -1 for
    null; a flag keeps the construct definition declarative and costs the same byte count."""

    def _decode(self, obj: Any, context: Any, path: Any) -> Any:
        return obj.value if obj.present else None

    def _encode(self, obj: Any, context: Any, path: Any) -> Any:
        return {"present": obj is not None, "value": obj}


def _nullable(sub: cs.Construct) -> cs.Construct:
    return _Nullable(cs.Struct("present" / cs.Flag, "value" / cs.If(cs.this.present, sub)))


_OFFSET_KEY = cs.Struct(
    "version" / cs.Const(OFFSET_KEY_VERSION, cs.Int16ub),
    "group" / _Str,
    "topic" / _Str,
    "partition" / cs.Int32sb,
)
_GROUP_KEY = cs.Struct(
    "version" / cs.Const(GROUP_KEY_VERSION, cs.Int16ub),
    "group" / _Str,
)
_OFFSET_VALUE = cs.Struct(
    "version" / cs.Const(OFFSET_VALUE_VERSION, cs.Int16ub),
    "offset" / cs.Int64sb,
    "leader_epoch" / cs.Int32sb,
    "metadata" / _Str,
    "commit_timestamp" / cs.Int64sb,
    "expire_timestamp" / cs.Int64sb,
)
_MEMBER = cs.Struct(
    "member_id" / _Str,
    "group_instance_id" / _nullable(_Str),
    "client_id" / _Str,
    "client_host" / _Str,
    "rebalance_timeout_ms" / cs.Int32sb,
    "session_timeout_ms" / cs.Int32sb,
    "subscription" / _Bytes,
    "assignment" / _Bytes,
)
_GROUP_VALUE = cs.Struct(
    "version" / cs.Const(GROUP_VALUE_VERSION, cs.Int16ub),
    "protocol_type" / _Str,
    "generation" / cs.Int32sb,
    "protocol_name" / _nullable(_Str),
    "leader" / _nullable(_Str),
    "state_timestamp" / cs.Int64sb,
    "members" / cs.PrefixedArray(cs.Int32ub, _MEMBER),
)


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


Key = OffsetKey | GroupKey


def encode_key(key: Key) -> bytes:
    if isinstance(key, OffsetKey):
        return bytes(_OFFSET_KEY.build({"group": key.group, "topic": key.topic, "partition": key.partition}))
    return bytes(_GROUP_KEY.build({"group": key.group}))


def decode_key(data: bytes) -> Key:
    if len(data) < 2:
        raise RecordFormatError(f"key of {len(data)} bytes has no version")
    version = int.from_bytes(data[:2], "big")
    try:
        if version == OFFSET_KEY_VERSION:
            k = _OFFSET_KEY.parse(data)
            return OffsetKey(k.group, k.topic, k.partition)
        if version == GROUP_KEY_VERSION:
            return GroupKey(_GROUP_KEY.parse(data).group)
    except cs.ConstructError as e:
        raise RecordFormatError(f"malformed key: {e}") from e
    raise RecordFormatError(f"unknown key version {version}")


def encode_offset_value(v: OffsetValue) -> bytes:
    return bytes(_OFFSET_VALUE.build({
        "offset": v.offset, "leader_epoch": v.leader_epoch, "metadata": v.metadata,
        "commit_timestamp": v.commit_timestamp, "expire_timestamp": v.expire_timestamp,
    }))


def decode_offset_value(data: bytes) -> OffsetValue:
    try:
        v = _OFFSET_VALUE.parse(data)
    except cs.ConstructError as e:
        raise RecordFormatError(f"malformed offset value: {e}") from e
    return OffsetValue(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)


def encode_group_value(v: GroupValue) -> bytes:
    return bytes(_GROUP_VALUE.build({
        "protocol_type": v.protocol_type, "generation": v.generation, "protocol_name": v.protocol_name,
        "leader": v.leader, "state_timestamp": v.state_timestamp,
        "members": [{
            "member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
            "client_host": m.client_host, "rebalance_timeout_ms": m.rebalance_timeout_ms,
            "session_timeout_ms": m.session_timeout_ms, "subscription": m.subscription,
            "assignment": m.assignment,
        } for m in v.members],
    }))


def decode_group_value(data: bytes) -> GroupValue:
    try:
        v = _GROUP_VALUE.parse(data)
    except cs.ConstructError as e:
        raise RecordFormatError(f"malformed group value: {e}") from e
    members = tuple(
        MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                    m.session_timeout_ms, bytes(m.subscription), bytes(m.assignment))
        for m in v.members
    )
    return GroupValue(v.protocol_type, v.generation, v.protocol_name, v.leader, v.state_timestamp, members)
