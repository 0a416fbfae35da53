"""Per-partition log settings, named after the Kafka topic configs they mirror.

Kept as one frozen value so a topic's config can be swapped atomically (the broker builds a new
`LogConfig` on AlterConfigs and hands it to the log) and so tests can state a whole setup in one
line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DAY_MS = 24 * 60 * 60 * 1000

TimestampType = Literal["CreateTime", "LogAppendTime"]


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition log.

    segment_bytes          roll when the active segment would grow past this (segment.bytes).
    segment_ms             roll when the active segment spans more than this (segment.ms).
    retention_bytes        delete old segments while the log is bigger than this; -1 = no limit.
    retention_ms           delete segments whose newest timestamp is older than this; -1 = keep.
    index_interval_bytes   add a sparse index entry after this many log bytes.
    max_index_size         bytes of .index per segment (segment.index.bytes); roll when full.
    flush_messages         fsync after this many new records; None = leave it to the OS,
                           1 = fsync after every append (the only setting that survives power loss
                           with nothing acknowledged lost).
    flush_ms               fsync when this long has passed since the last fsync; None = never.
    cleanup_policy         'delete' applies retention; 'compact' turns size/time retention off
                           and lets storage.cleaner.clean keep only the latest record per key;
                           'compact,delete' (either order) does both: compaction, and segments
                           past retention deleted all the same; '' neither (the log keeps everything).
    delete_retention_ms    compaction keeps tombstones and transaction markers this long after
                           the cleaner first saw them removable (delete.retention.ms).
    min_cleanable_dirty_ratio  compaction runs once this share of the cleanable bytes was
                           written since the last run (min.cleanable.dirty.ratio).
    message_timestamp_type 'LogAppendTime' stamps each batch with the broker's clock.
    max_message_bytes      the largest batch a producer may append (max.message.bytes).
    min_insync_replicas    acks=all needs at least this many in-sync replicas (min.insync.replicas).
    producer_id_expiration_ms  forget idle idempotent producers after this long
                           (producer.id.expiration.ms); producers with an open transaction stay.
    """

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * DAY_MS
    retention_bytes: int = -1
    retention_ms: int = 7 * DAY_MS
    index_interval_bytes: int = 4096
    max_index_size: int = 10 * 1024 * 1024
    flush_messages: int | None = None
    flush_ms: int | None = None
    cleanup_policy: str = "delete"
    message_timestamp_type: TimestampType = "CreateTime"
    producer_id_expiration_ms: int = DAY_MS
    delete_retention_ms: int = DAY_MS
    min_cleanable_dirty_ratio: float = 0.5
    max_message_bytes: int = 1048588
    min_insync_replicas: int = 1

    def __post_init__(self) -> None:
        # Positions in the offset index are int32, so a segment must stay addressable by them.
        if not 14 <= self.segment_bytes <= 0x7FFFFFFF:
            raise ValueError(f"segment_bytes must be in [14, 2^31-1], got {self.segment_bytes}")
        if self.segment_ms <= 0:
            raise ValueError("segment_ms must be positive")
        if self.index_interval_bytes < 0:
            raise ValueError("index_interval_bytes must be >= 0")
        if self.max_index_size < 8:
            raise ValueError("max_index_size must hold at least one entry")
        if self.flush_messages is not None and self.flush_messages < 1:
            raise ValueError("flush_messages must be >= 1 or None")
        if self.flush_ms is not None and self.flush_ms < 0:
            raise ValueError("flush_ms must be >= 0 or None")
        # Empty is a policy too (Kafka 4): neither retention nor compaction removes anything.
        parts = [p for p in self.cleanup_policy.split(",") if p]
        if len(set(parts)) != len(parts) or not set(parts) <= {"delete", "compact"}:
            raise ValueError(f"unknown cleanup_policy {self.cleanup_policy!r}")
        if self.delete_retention_ms < 0:
            raise ValueError("delete_retention_ms must be >= 0")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError("min_cleanable_dirty_ratio must be in [0, 1]")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(f"unknown message_timestamp_type {self.message_timestamp_type!r}")

    @property
    def deletes(self) -> bool:
        """Retention (and DeleteRecords) may remove old segments."""
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compacts(self) -> bool:
        """The log cleaner keeps only the latest record per key."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def max_index_entries(self) -> int:
        """Offset-index entries per segment (8 bytes each)."""
        return self.max_index_size // 8

    @property
    def max_time_index_entries(self) -> int:
        """Time-index entries per segment (12 bytes each)."""
        return max(1, self.max_index_size // 12)
