"""This broker's metadata image, and who follows it.

Every broker — controller or not — applies the committed metadata log to one immutable image
(design.md §6). The publisher owns that image: the quorum hands it each committed entry and each
snapshot it restarts from, it replays them, and hands every new image to its subscribers — the
topic table (which opens, leads, follows and drops partitions, and with their leadership loads or
unloads the coordinators) and the marker sender. The controller decides on this same image
(QuorumController reads it from here) and keeps only what it proposed and has not seen committed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import structlog

from protocol.messages.metadata_records import NoOpRecord, unframe_batch
from protocol.primitives import DecodeError

from .image import MetadataImage

if TYPE_CHECKING:
    from ..quorum.messages import Entry, Snapshot

log = structlog.get_logger()


class MetadataPublisher:
    def __init__(self) -> None:
        self.image = MetadataImage()
        self._subscribers: list[Callable[[MetadataImage], None]] = []
        self.on_restore: Callable[[], None] = lambda: None  # the controller drops its working view

    def subscribe(self, subscriber: Callable[[MetadataImage], None]) -> None:
        self._subscribers.append(subscriber)

    def replay_all(self, offset: int, records: Sequence[object]) -> None:
        """The records of one committed entry: all applied, or (ValueError) none."""
        self.image = self.image.apply_all(offset, records)

    def on_commit(self, entry: Entry) -> None:
        """A committed metadata entry: its records applied to the image together, or — if this
        broker cannot read or apply one of them — logged and skipped whole (never half-applied)."""
        try:
            records = unframe_batch(entry.data)
            self.replay_all(entry.offset, records)
        except (DecodeError, ValueError) as e:
            log.error("metadata entry not applied", offset=entry.offset, epoch=entry.epoch, error=str(e))
            return
        if not all(isinstance(r, NoOpRecord) for r in records):  # the leader's keep-alive (quorum/lease.py)
            self._publish()

    def on_snapshot(self, snapshot: Snapshot) -> None:
        """The image restarts from a snapshot (at start, or sent by the quorum leader)."""
        self.image = MetadataImage.from_snapshot(snapshot.data)
        self.on_restore()
        self._publish()

    def _publish(self) -> None:
        for subscriber in self._subscribers:
            subscriber(self.image)
