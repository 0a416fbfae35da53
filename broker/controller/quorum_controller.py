"""The controller's decisions, sans-IO: what records to propose for a request, given the image.

It runs on the quorum leader. Decisions are taken against a working view — the committed image
plus what this controller proposed and has not seen committed yet — so two requests in flight
never get the same producer ids. When leadership is lost the working view is dropped; the next
leader starts from its committed image (after replaying its whole log: the shell serves only
once the leader's own epoch has committed).
"""

from __future__ import annotations

from protocol.messages.metadata_records import ProducerIdsRecord, frame

from ..metadata.image import MetadataImage

PRODUCER_ID_BLOCK = 1000


class QuorumController:
    def __init__(self, producer_id_floor: int = 0) -> None:
        self.image = MetadataImage()
        self._next_producer_id: int | None = None  # working view: includes uncommitted blocks
        # Ids below this were handed out before the quorum kept them (a data directory from a
        # Ketch that wrote producer_ids.json): never hand them out again.
        self.producer_id_floor = producer_id_floor

    def replay(self, offset: int, record: object) -> None:
        """A committed record, in log order (on every broker, leader or not)."""
        self.image = self.image.apply(offset, record)

    def reset(self) -> None:
        """Leadership changed: forget what was proposed and not committed."""
        self._next_producer_id = None

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[bytes, int, int]:
        """(record to propose, first id, count): the block is the broker's once the record commits."""
        start = max(self.image.next_producer_id, self._next_producer_id or 0, self.producer_id_floor)
        self._next_producer_id = start + PRODUCER_ID_BLOCK
        record = ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                   next_producer_id=start + PRODUCER_ID_BLOCK)
        return frame(record), start, PRODUCER_ID_BLOCK
