"""Small value types of the public API, kept apart so that the sans-IO modules need no I/O imports."""

from __future__ import annotations

from typing import NamedTuple

from protocol.topic_partition import TopicPartition

__all__ = ["ConsumerGroupMetadata", "ConsumerRecord", "EncodedRecords", "OffsetAndMetadata", "RecordMetadata",
           "ShareRecord", "TopicPartition"]


class OffsetAndMetadata(NamedTuple):
    """An offset to commit: the offset of the next record to read, plus free-form metadata."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class RecordMetadata(NamedTuple):
    """Where a produced record was written (offset -1 when acks=0: the broker does not say)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    log_append_time: int = -1


class ConsumerGroupMetadata(NamedTuple):
    """The group member identity a transactional producer passes with its offsets, so that a
    zombie member (one the group has since fenced by rebalancing) cannot commit (KIP-447)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class ConsumerRecord(NamedTuple):
    """One record handed to the application."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_type: int = 0


class ShareRecord(NamedTuple):
    """A record a ShareConsumer acquired: a ConsumerRecord's fields, and how many times the share
    group has delivered it (1 the first time; more after a RELEASE or a lock that ran out)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_type: int
    delivery_count: int


class EncodedRecords(NamedTuple):
    """Records already framed back to back as in a batch (offset deltas 0..record_count-1, timestamp
    deltas from `base_timestamp`), waiting for their batch header: Producer.send_batch() sends them
    as one batch. Built by client/arrow.py from Arrow columns, without a Python object per record."""

    section: bytes | bytearray | memoryview
    record_count: int
    base_timestamp: int
    max_timestamp: int
