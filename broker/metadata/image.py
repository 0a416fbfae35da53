"""MetadataImage: the committed metadata log, applied. Immutable: a record makes a new image.

Every broker (voter or not) applies the committed entries of the metadata quorum in order, so
every image at the same offset is the same. So far the image holds what the log carries today:
the producer-id blocks handed out. Topics, partitions, brokers and configs join it as their
records are written (docs/cluster.md).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace

from protocol.messages.metadata_records import ProducerIdsRecord


@dataclass(frozen=True, slots=True)
class MetadataImage:
    offset: int = -1  # the last log offset applied
    next_producer_id: int = 0  # ids below this are handed out (ProducerIdsRecord)

    def to_snapshot(self) -> bytes:
        """The image as a quorum snapshot's payload (JSON: small, and readable when debugging)."""
        return json.dumps({"version": 1, **asdict(self)}, sort_keys=True).encode()

    @classmethod
    def from_snapshot(cls, data: bytes) -> MetadataImage:
        raw = json.loads(data)
        if raw.pop("version", None) != 1:
            raise ValueError("unknown metadata snapshot version")
        return cls(**raw)

    def apply(self, offset: int, record: object) -> MetadataImage:
        if isinstance(record, ProducerIdsRecord):
            if record.next_producer_id <= self.next_producer_id:
                raise ValueError(f"producer-id block ending at {record.next_producer_id} does not follow "
                                 f"{self.next_producer_id}")
            return replace(self, offset=offset, next_producer_id=record.next_producer_id)
        raise ValueError(f"no rule to apply {type(record).__name__}")
