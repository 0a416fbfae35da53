"""`__transaction_state` records in Kafka's layout (TransactionLogKey v0, TransactionLogValue v0/v1).

The schemas live in protocol/messages/coordinator_records.py with every other Kafka message;
this module maps them to the coordinator's TxnRecord. The log is compacted by key: a value holds
the whole state of the id, never a delta. A null value (tombstone) removes an expired id.

Version 0 is written unless a KIP-890 field (the previous or next producer id of an EndTxn v5
rotation) or KIP-939's next producer epoch (a prepared transaction taken over by a new instance,
tag 3) must be kept, then the flexible version 1 with those as tagged fields — what a Kafka 4
broker reads either way. A two-phase-commit id needs no field of its own: its timeout is Kafka's
Int.MaxValue mark. Kafka does not store the last producer epoch (the KIP-360 retry
window); neither do we, so after a coordinator load it is unknown (-1) in both. An EndTxn v5
retry needs none: it is told from the epoch and the previous producer id (machine._is_v5_retry).
"""

from __future__ import annotations

from protocol.messages.coordinator_records import (
    TransactionLogKey,
    TransactionLogValue,
    TxnPartitions,
    read_version_prefixed,
    version_prefixed,
)
from protocol.primitives import DecodeError
from protocol.topic_partition import TopicPartition

from .state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TxnRecord, TxnState

KEY_VERSION = 0


class TxnLogFormatError(ValueError):
    """A record we cannot read: an unknown version, or damage the batch CRC did not catch."""


def encode_key(transactional_id: str) -> bytes:
    return version_prefixed(TransactionLogKey(transactional_id=transactional_id), KEY_VERSION)


def decode_key(data: bytes) -> str:
    try:
        return read_version_prefixed(TransactionLogKey, data)[1].transactional_id
    except (DecodeError, UnicodeDecodeError) as e:
        raise TxnLogFormatError(f"unreadable transaction log key: {e}") from e


def encode_value(rec: TxnRecord) -> bytes:
    partitions: list[TxnPartitions] | None = None
    if rec.state != TxnState.EMPTY:
        by_topic: dict[str, list[int]] = {}
        for topic, part in sorted(rec.partitions):
            by_topic.setdefault(topic, []).append(part)
        partitions = [TxnPartitions(topic=t, partition_ids=ps) for t, ps in by_topic.items()]
    value = TransactionLogValue(
        producer_id=rec.producer_id, previous_producer_id=rec.last_producer_id,
        next_producer_id=rec.next_producer_id, producer_epoch=rec.producer_epoch,
        transaction_timeout_ms=rec.timeout_ms, transaction_status=int(rec.state),
        transaction_partitions=partitions, transaction_last_update_timestamp_ms=rec.update_ms,
        transaction_start_timestamp_ms=rec.start_ms, next_producer_epoch=rec.next_producer_epoch)
    flexible = (rec.last_producer_id != NO_PRODUCER_ID or rec.next_producer_id != NO_PRODUCER_ID
                or rec.next_producer_epoch != NO_PRODUCER_EPOCH)
    return version_prefixed(value, 1 if flexible else 0)


def decode_value(data: bytes) -> TxnRecord:
    try:
        _, v = read_version_prefixed(TransactionLogValue, data)
        state = TxnState(v.transaction_status)
    except (DecodeError, UnicodeDecodeError, ValueError) as e:
        raise TxnLogFormatError(f"unreadable transaction log value: {e}") from e
    parts: set[TopicPartition] = set()
    if state != TxnState.EMPTY:
        parts = {TopicPartition(t.topic, p) for t in v.transaction_partitions or () for p in t.partition_ids}
    return TxnRecord(v.producer_id, v.producer_epoch, v.previous_producer_id, NO_PRODUCER_EPOCH,
                     v.next_producer_id, v.transaction_timeout_ms, state, frozenset(parts),
                     v.transaction_start_timestamp_ms, v.transaction_last_update_timestamp_ms,
                     v.next_producer_epoch)
