"""What has been read back from one `__consumer_offsets` partition while it loads."""

from __future__ import annotations

from dataclasses import dataclass

from . import records as rec
from .model import OffsetEntry, TopicPartition


@dataclass(slots=True)
class Loading:
    """What has been read back from one `__consumer_offsets` partition so far."""

    groups: dict[str, rec.GroupValue | None]
    offsets: dict[str, dict[TopicPartition, OffsetEntry | None]]
    txn: dict[int, dict[str, dict[TopicPartition, OffsetEntry]]]
