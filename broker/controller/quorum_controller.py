"""The controller's decisions, sans-IO: what records to propose for a request, given the image.

It runs on the quorum leader. Decisions are taken against a working view — the committed image
plus what this controller proposed and has not seen committed yet — so two requests in flight
never get the same producer ids or broker epochs. When leadership is lost the working view is
dropped; the next leader starts from its committed image (the shell serves only once the
leader's own epoch has committed, so that image holds everything committed before).

Brokers: a registration gets a new broker epoch and a RegisterBrokerRecord (fenced); heartbeats
from a broker that has applied the log up to its registration unfence it; a broker not heard
from for the session timeout is fenced (on a new leader, every broker gets a full session first).
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.errors import ErrorCode
from protocol.messages.metadata_records import (
    BrokerEndpoint,
    FenceBrokerRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    frame,
)

from ..metadata.image import MetadataImage

PRODUCER_ID_BLOCK = 1000
REGISTER_BROKER_RECORD_VERSION = 1
PLAINTEXT = 0  # SecurityProtocol id


class QuorumController:
    def __init__(self, producer_id_floor: int = 0, session_timeout_ms: int = 9000) -> None:
        self.image = MetadataImage()
        self.session_timeout_ms = session_timeout_ms
        self._next_producer_id: int | None = None  # working view: includes uncommitted blocks
        # Ids below this were handed out before the quorum kept them (a data directory from a
        # Ketch that wrote producer_ids.json): never hand them out again.
        self.producer_id_floor = producer_id_floor
        self._next_broker_epoch: int | None = None
        self._heard: dict[int, int] = {}  # broker -> when its last heartbeat came (this leadership only)
        self._lead_since_ms: int | None = None
        self._fencing: set[tuple[int, int]] = set()  # (broker, epoch) proposed for fencing, not yet applied

    def replay(self, offset: int, record: object) -> None:
        """A committed record, in log order (on every broker, leader or not)."""
        self.image = self.image.apply(offset, record)

    def reset(self) -> None:
        """Leadership changed: forget what was proposed and not committed, and who was heard."""
        self._next_producer_id = None
        self._next_broker_epoch = None
        self._heard.clear()
        self._lead_since_ms = None
        self._fencing.clear()

    # ---- producer ids ---------------------------------------------------------------------------
    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[bytes, int, int]:
        """(record to propose, first id, count): the block is the broker's once the record commits."""
        start = max(self.image.next_producer_id, self._next_producer_id or 0, self.producer_id_floor)
        self._next_producer_id = start + PRODUCER_ID_BLOCK
        record = ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                   next_producer_id=start + PRODUCER_ID_BLOCK)
        return frame(record), start, PRODUCER_ID_BLOCK

    # ---- brokers --------------------------------------------------------------------------------------
    def register_broker(self, broker_id: int, incarnation_id: object, listeners: Sequence[tuple[str, str, int]],
                        rack: str | None, now_ms: int) -> tuple[bytes, int]:
        """(record, broker epoch) for a broker that (re)starts: a new epoch, fenced until caught up."""
        epoch = max([b.epoch for b in self.image.brokers] + [self._next_broker_epoch or 0]) + 1
        self._next_broker_epoch = epoch
        self._heard[broker_id] = now_ms
        record = RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id=incarnation_id, broker_epoch=epoch,  # type: ignore[arg-type]
            end_points=[BrokerEndpoint(name=n, host=h, port=p, security_protocol=PLAINTEXT) for n, h, p in listeners],
            rack=rack, fenced=True)
        return frame(record, REGISTER_BROKER_RECORD_VERSION), epoch

    def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, want_fence: bool,
                  now_ms: int) -> tuple[int, bytes | None, bool, bool]:
        """(error, record to propose or None, caught up, fenced once the record applies)."""
        b = self.image.broker(broker_id)
        if b is None:
            return ErrorCode.BROKER_ID_NOT_REGISTERED, None, False, True
        if b.epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH, None, False, True
        self._heard[broker_id] = now_ms
        caught_up = metadata_offset >= b.registered_at
        if b.fenced and caught_up and not want_fence:
            return 0, frame(UnfenceBrokerRecord(id=broker_id, epoch=b.epoch)), True, False
        if not b.fenced and want_fence:
            return 0, frame(FenceBrokerRecord(id=broker_id, epoch=b.epoch)), caught_up, True
        return 0, None, caught_up, b.fenced

    def expire(self, now_ms: int) -> list[bytes]:
        """Fence every unfenced broker not heard from for the session timeout."""
        if self._lead_since_ms is None:
            self._lead_since_ms = now_ms  # a new leader: every broker gets a full session first
        self._fencing = {(n, e) for n, e in self._fencing if (b := self.image.broker(n)) and not b.fenced
                         and b.epoch == e}
        out = []
        for b in self.image.brokers:
            last = self._heard.get(b.node_id, self._lead_since_ms)
            if not b.fenced and now_ms - last > self.session_timeout_ms and (b.node_id, b.epoch) not in self._fencing:
                self._fencing.add((b.node_id, b.epoch))
                out.append(frame(FenceBrokerRecord(id=b.node_id, epoch=b.epoch)))
        return out
