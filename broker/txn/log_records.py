"""The binary layout of `__transaction_state` records, declared with `construct`.

Key and value each start with an int16 version, so a newer broker can add fields and an older
one can tell it cannot read them (and refuse to start rather than misread a transaction). The
log is compacted by key: a value must hold the whole state of the id, never a delta. A null
value (tombstone) removes an expired transactional id.

    key   v0: version int16 | transactional_id string (int16 length, UTF-8)
    value v0: version int16 | producer_id int64 | producer_epoch int16 | last_producer_id int64
              | last_producer_epoch int16 | next_producer_id int64 | timeout_ms int32 | state int8
              | partitions [topic string, [partition int32]] (int32 counts) | start_ms int64
              | update_ms int64

Our own layout rather than Kafka's: Kafka's v1 value is flexible (tagged fields) and brokers never
read each other's `__transaction_state` across products, so nothing gains from the extra machinery.
"""

from __future__ import annotations

import construct as c

from protocol.topic_partition import TopicPartition

from .state import TxnRecord, TxnState

KEY_VERSION = 0
VALUE_VERSION = 0

_String = c.PascalString(c.Int16ub, "utf8")

KEY = c.Struct(
    "version" / c.Const(KEY_VERSION, c.Int16sb),
    "transactional_id" / _String,
)

_TopicPartitions = c.Struct(
    "topic" / _String,
    "partitions" / c.PrefixedArray(c.Int32ub, c.Int32sb),
)

VALUE = c.Struct(
    "version" / c.Const(VALUE_VERSION, c.Int16sb),
    "producer_id" / c.Int64sb,
    "producer_epoch" / c.Int16sb,
    "last_producer_id" / c.Int64sb,
    "last_producer_epoch" / c.Int16sb,
    "next_producer_id" / c.Int64sb,
    "timeout_ms" / c.Int32sb,
    "state" / c.Int8sb,
    "topics" / c.PrefixedArray(c.Int32ub, _TopicPartitions),
    "start_ms" / c.Int64sb,
    "update_ms" / c.Int64sb,
    c.Terminated,
)


class TxnLogFormatError(ValueError):
    """A record we cannot read: a newer version, or damage the batch CRC did not catch."""


def encode_key(transactional_id: str) -> bytes:
    return KEY.build({"transactional_id": transactional_id})


def decode_key(data: bytes) -> str:
    try:
        return str(KEY.parse(data).transactional_id)
    except c.ConstructError as e:
        raise TxnLogFormatError(f"unreadable transaction log key: {e}") from e


def encode_value(rec: TxnRecord) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, part in sorted(rec.partitions):
        by_topic.setdefault(topic, []).append(part)
    return VALUE.build({
        "producer_id": rec.producer_id, "producer_epoch": rec.producer_epoch,
        "last_producer_id": rec.last_producer_id, "last_producer_epoch": rec.last_producer_epoch,
        "next_producer_id": rec.next_producer_id, "timeout_ms": rec.timeout_ms, "state": int(rec.state),
        "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
        "start_ms": rec.start_ms, "update_ms": rec.update_ms,
    })


def decode_value(data: bytes) -> TxnRecord:
    try:
        v = VALUE.parse(data)
        state = TxnState(v.state)
    except (c.ConstructError, ValueError) as e:
        raise TxnLogFormatError(f"unreadable transaction log value: {e}") from e
    parts: set[TopicPartition] = {TopicPartition(t.topic, p) for t in v.topics for p in t.partitions}
    return TxnRecord(v.producer_id, v.producer_epoch, v.last_producer_id, v.last_producer_epoch,
                     v.next_producer_id, v.timeout_ms, state, frozenset(parts), v.start_ms, v.update_ms)
