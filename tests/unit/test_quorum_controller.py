"""The controller's decisions — producer-id blocks, broker registration, heartbeats and fencing —
and the records they become (the allocator against real brokers: tests/integration/test_producer_id_blocks.py)."""

from __future__ import annotations

import uuid

import pytest

from broker.controller.quorum_controller import PRODUCER_ID_BLOCK, QuorumController
from broker.metadata.image import MetadataImage
from protocol.errors import ErrorCode
from protocol.messages.metadata_records import ProducerIdsRecord, frame, unframe
from protocol.primitives import DecodeError


def test_blocks_in_flight_never_overlap_and_commit_in_order() -> None:
    c = QuorumController()
    r1, s1, n1 = c.allocate_producer_ids(1, -1)
    r2, s2, n2 = c.allocate_producer_ids(2, -1)  # before the first committed
    assert (s1, n1, s2, n2) == (0, PRODUCER_ID_BLOCK, PRODUCER_ID_BLOCK, PRODUCER_ID_BLOCK)
    c.replay(5, unframe(r1))
    c.replay(6, unframe(r2))
    assert c.image == MetadataImage(offset=6, next_producer_id=2 * PRODUCER_ID_BLOCK)


def test_a_new_leader_starts_from_what_was_committed() -> None:
    c = QuorumController()
    r1, _, _ = c.allocate_producer_ids(1, -1)
    c.replay(3, unframe(r1))
    c.allocate_producer_ids(1, -1)  # proposed, then leadership lost before it committed
    c.reset()
    _, start, _ = c.allocate_producer_ids(2, -1)
    assert start == PRODUCER_ID_BLOCK  # the lost proposal's block is handed out again: nobody got it


def test_ids_handed_out_before_the_quorum_stay_taken() -> None:
    c = QuorumController(producer_id_floor=5000)
    assert c.allocate_producer_ids(1, -1)[1] == 5000


def test_the_image_refuses_a_block_that_goes_backwards() -> None:
    img = MetadataImage().apply(0, ProducerIdsRecord(broker_id=1, next_producer_id=1000))
    with pytest.raises(ValueError):
        img.apply(1, ProducerIdsRecord(broker_id=2, next_producer_id=1000))


def test_record_framing_is_kafkas() -> None:
    data = frame(ProducerIdsRecord(broker_id=2, broker_epoch=7, next_producer_id=3000))
    # frame version 1, record type 15, version 0 (unsigned varints), then the flexible body
    assert data == bytes([1, 15, 0]) + (2).to_bytes(4, "big") + (7).to_bytes(8, "big") + (3000).to_bytes(8, "big") + b"\x00"
    assert unframe(data) == ProducerIdsRecord(broker_id=2, broker_epoch=7, next_producer_id=3000)
    for bad in (bytes([2, 15, 0]) + data[3:], bytes([1, 99, 0]), bytes([1, 15, 3]) + data[3:], data + b"\x00"):
        with pytest.raises(DecodeError):
            unframe(bad)


# ---- brokers: registration, heartbeats, fencing -----------------------------------------------------
LISTENERS = [("PLAINTEXT", "h1", 9092), ("BROKER", "h1", 9093)]


def _register(c: QuorumController, node: int, now: int, offset: int) -> int:
    record, epoch = c.register_broker(node, uuid.uuid4(), LISTENERS, None, now)
    c.replay(offset, unframe(record))
    return epoch


def test_a_broker_is_unfenced_once_caught_up_and_fenced_when_silent() -> None:
    c = QuorumController(session_timeout_ms=1000)
    epoch = _register(c, 1, now=0, offset=10)
    b = c.image.broker(1)
    assert b is not None and b.fenced and (b.host, b.port, b.inter_broker_port) == ("h1", 9092, 9093)
    error, record, caught_up, fenced = c.heartbeat(1, epoch, metadata_offset=9, want_fence=False, now_ms=100)
    assert (error, record, caught_up, fenced) == (0, None, False, True)  # not yet at its registration
    error, record, caught_up, fenced = c.heartbeat(1, epoch, metadata_offset=10, want_fence=False, now_ms=200)
    assert error == 0 and record is not None and caught_up and not fenced
    c.replay(11, unframe(record))
    assert c.image.broker(1).fenced is False  # type: ignore[union-attr]
    assert c.expire(now_ms=1100) == []  # heard 900 ms ago
    [fence] = c.expire(now_ms=1300)
    assert c.expire(now_ms=1400) == []  # already proposed, not proposed twice
    c.replay(12, unframe(fence))
    assert c.image.broker(1).fenced is True  # type: ignore[union-attr]


def test_stale_and_unknown_heartbeats_are_refused() -> None:
    c = QuorumController()
    first = _register(c, 1, now=0, offset=0)
    second = _register(c, 1, now=0, offset=1)  # restarted: a new epoch replaces the old
    assert second > first
    assert c.heartbeat(1, first, 5, False, 0)[0] == ErrorCode.STALE_BROKER_EPOCH
    assert c.heartbeat(2, 1, 5, False, 0)[0] == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_a_new_leader_gives_every_broker_a_full_session() -> None:
    c = QuorumController(session_timeout_ms=1000)
    epoch = _register(c, 1, now=0, offset=0)
    c.replay(1, unframe(c.heartbeat(1, epoch, 0, False, 0)[1]))  # type: ignore[arg-type]
    c.reset()  # leadership moved here at t=5000: nobody was heard by this leader yet
    assert c.expire(now_ms=5000) == [] and c.expire(now_ms=5900) == []
    assert len(c.expire(now_ms=6100)) == 1


def test_broker_records_survive_a_snapshot() -> None:
    c = QuorumController()
    _register(c, 3, now=0, offset=4)
    assert MetadataImage.from_snapshot(c.image.to_snapshot()) == c.image


def test_a_metadata_record_the_broker_cannot_read_is_skipped_whole(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """An unknown record type, an unknown version, or a record that contradicts the image: logged,
    not applied, and the image stays what it was (never half-applied, never a crash)."""
    from broker.config import BrokerConfig  # noqa: PLC0415
    from broker.quorum.messages import Entry  # noqa: PLC0415
    from broker.server import BrokerServer  # noqa: PLC0415

    server = BrokerServer(BrokerConfig(data_dir=str(tmp_path)))
    good = frame(ProducerIdsRecord(broker_id=1, next_producer_id=1000))
    server._on_metadata(Entry(0, 1, good))
    before = server.controller.image
    for bad in (bytes([1, 99, 0, 0]), bytes([1, 15, 7]) + good[3:], good, b"\xff"):
        server._on_metadata(Entry(1, 1, bad))  # `good` again goes backwards: refused by the image
    assert server.controller.image == before
    out = capsys.readouterr()
    assert (out.out + out.err).count("metadata record not applied") == 4
