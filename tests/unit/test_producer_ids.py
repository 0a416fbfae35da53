"""Producer-id blocks through the metadata quorum: the controller's decisions and the records
they become (the allocator against real brokers: tests/integration/test_producer_id_blocks.py)."""

from __future__ import annotations

import pytest

from broker.controller.quorum_controller import PRODUCER_ID_BLOCK, QuorumController
from broker.metadata.image import MetadataImage
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
