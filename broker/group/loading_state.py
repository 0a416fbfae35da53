"""What has been read back from one `__consumer_offsets` partition while it loads."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import records as rec
from .model import OffsetEntry, TopicPartition


@dataclass(slots=True)
class Loading:
    """What has been read back from one `__consumer_offsets` partition so far, by the load of
    one election (`coordinator_epoch`, the partition's leader epoch): a load of an earlier
    election still running must not add to it."""

    coordinator_epoch: int
    groups: dict[str, rec.GroupValue | None] = field(default_factory=dict)
    offsets: dict[str, dict[TopicPartition, OffsetEntry | None]] = field(default_factory=dict)
    txn: dict[int, dict[str, dict[TopicPartition, OffsetEntry]]] = field(default_factory=dict)
