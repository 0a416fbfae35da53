"""Issue 25: every broker's metadata image is owned by its publisher, which replays the committed
metadata log into it and hands each new image to those that follow it (the topic table, the
marker sender). The controller decides on that same image and keeps none of its own."""

from __future__ import annotations

import uuid

from broker.controller.quorum_controller import QuorumController
from broker.metadata.image import MetadataImage
from broker.metadata.publisher import MetadataPublisher
from broker.quorum.messages import Entry, Snapshot
from protocol.messages.metadata_records import NoOpRecord, frame

LISTENERS = [("PLAINTEXT", "h1", 9092), ("BROKER", "h1", 9093)]


def test_the_controller_decides_on_the_image_the_publisher_owns() -> None:
    metadata = MetadataPublisher()
    controller = QuorumController(metadata=metadata)
    published: list[MetadataImage] = []
    metadata.subscribe(published.append)
    entry, epoch = controller.register_broker(1, uuid.uuid4(), LISTENERS, None, now_ms=0)
    metadata.on_commit(Entry(0, 1, entry))
    assert controller.image is metadata.image and published == [metadata.image]
    b = metadata.image.broker(1)
    assert b is not None and b.epoch == epoch
    assert not hasattr(controller, "replay_all") and not hasattr(controller, "replay")  # no cache of its own


def test_a_keep_alive_moves_the_offset_and_publishes_nothing() -> None:
    metadata = MetadataPublisher()
    published: list[MetadataImage] = []
    metadata.subscribe(published.append)
    metadata.on_commit(Entry(7, 1, frame(NoOpRecord())))
    assert metadata.image.offset == 7 and published == []


def test_a_snapshot_replaces_the_image_resets_the_controller_and_is_published() -> None:
    source = QuorumController()
    entry, _ = source.register_broker(1, uuid.uuid4(), LISTENERS, None, now_ms=0)
    source.metadata.on_commit(Entry(4, 1, entry))
    metadata = MetadataPublisher()
    controller = QuorumController(metadata=metadata)
    resets: list[None] = []
    controller.reset = lambda: resets.append(None)  # type: ignore[method-assign]
    metadata.on_restore = controller.reset
    published: list[MetadataImage] = []
    metadata.subscribe(published.append)
    metadata.on_snapshot(Snapshot(5, 1, source.image.to_snapshot()))
    assert metadata.image == source.image and published == [metadata.image] and resets == [None]
