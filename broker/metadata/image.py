"""MetadataImage: the committed metadata log, applied. Immutable: a record makes a new image.

Every broker (voter or not) applies the committed entries of the metadata quorum in order, so
every image at the same offset is the same. So far the image holds what the log carries today:
the producer-id blocks handed out. Topics, partitions, brokers and configs join it as their
records are written (docs/cluster.md).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace

from protocol.messages.metadata_records import (
    FenceBrokerRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A registered broker as the metadata log says: where clients reach it, and whether it may lead."""

    node_id: int
    epoch: int
    host: str  # the client listener (PLAINTEXT)
    port: int
    rack: str | None
    fenced: bool
    registered_at: int  # the log offset of its registration: caught up once it has applied this
    inter_broker_host: str = ""  # the inter-broker listener (BROKER)
    inter_broker_port: int = 0


@dataclass(frozen=True, slots=True)
class MetadataImage:
    offset: int = -1  # the last log offset applied
    next_producer_id: int = 0  # ids below this are handed out (ProducerIdsRecord)
    brokers: tuple[BrokerInfo, ...] = ()  # by node id

    def broker(self, node_id: int) -> BrokerInfo | None:
        return next((b for b in self.brokers if b.node_id == node_id), None)

    def _with_broker(self, offset: int, info: BrokerInfo) -> MetadataImage:
        others = tuple(b for b in self.brokers if b.node_id != info.node_id)
        return replace(self, offset=offset, brokers=tuple(sorted(others + (info,), key=lambda b: b.node_id)))

    def to_snapshot(self) -> bytes:
        """The image as a quorum snapshot's payload (JSON: small, and readable when debugging)."""
        return json.dumps({"version": 1, **asdict(self)}, sort_keys=True).encode()

    @classmethod
    def from_snapshot(cls, data: bytes) -> MetadataImage:
        raw = json.loads(data)
        if raw.pop("version", None) != 1:
            raise ValueError("unknown metadata snapshot version")
        raw["brokers"] = tuple(BrokerInfo(**b) for b in raw.get("brokers", ()))
        return cls(**raw)

    def apply(self, offset: int, record: object) -> MetadataImage:
        if isinstance(record, ProducerIdsRecord):
            if record.next_producer_id <= self.next_producer_id:
                raise ValueError(f"producer-id block ending at {record.next_producer_id} does not follow "
                                 f"{self.next_producer_id}")
            return replace(self, offset=offset, next_producer_id=record.next_producer_id)
        if isinstance(record, RegisterBrokerRecord):
            ends = {e.name: (e.host, e.port) for e in record.end_points}
            host, port = ends.get("PLAINTEXT", ("", 0))
            ib_host, ib_port = ends.get("BROKER", ("", 0))
            return self._with_broker(offset, BrokerInfo(record.broker_id, record.broker_epoch, host, port, record.rack,
                                                        record.fenced, offset, ib_host, ib_port))
        if isinstance(record, FenceBrokerRecord | UnfenceBrokerRecord):
            b = self.broker(record.id)
            if b is None or b.epoch != record.epoch:
                raise ValueError(f"{type(record).__name__} for broker {record.id} epoch {record.epoch}, "
                                 f"registered: {b}")
            return self._with_broker(offset, replace(b, fenced=isinstance(record, FenceBrokerRecord)))
        raise ValueError(f"no rule to apply {type(record).__name__}")
