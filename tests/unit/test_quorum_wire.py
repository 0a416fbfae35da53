"""The quorum's messages survive the trip through Kafka's KRaft wire messages and back, bytes
included (encode at a version, decode, translate back)."""

from __future__ import annotations

from typing import Any

import pytest

from broker.quorum import wire_codec as wc
from broker.quorum.messages import (
    BeginQuorumEpoch,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Snapshot,
    VoteRequest,
    VoteResponse,
)
from protocol.primitives import Reader
from protocol.schema import Message


def _bytes_round_trip(msg: Message, version: int) -> Any:
    back = type(msg).read(Reader(msg.encode(version)), version)
    assert back.encode(version) == msg.encode(version)
    return back


@pytest.mark.parametrize("pre_vote", [False, True])
def test_vote(pre_vote: bool) -> None:
    m = VoteRequest(7, 2, 41, 6, pre_vote)
    wire = _bytes_round_trip(wc.vote_request_to_wire(m, "c1", 3), 2)
    assert wire.topics[0].partitions[0].last_offset == 42  # Kafka names the log end offset
    assert wc.vote_request_from_wire(wire) == m
    r = VoteResponse(7, True, pre_vote, 2)
    assert wc.vote_response_from_wire(_bytes_round_trip(wc.vote_response_to_wire(r), 2), pre_vote) == r
    refused = _bytes_round_trip(wc.vote_response_to_wire(None, 104), 2)
    assert refused.error_code == 104 and wc.vote_response_from_wire(refused, pre_vote) is None


def test_begin_quorum_epoch() -> None:
    m = BeginQuorumEpoch(9, 1)
    assert wc.begin_epoch_from_wire(_bytes_round_trip(wc.begin_epoch_to_wire(m, "c1", 2), 1)) == m


ENTRIES = (Entry(10, 3, b"a"), Entry(11, 3, b""), Entry(12, 4, b"b" * 100), Entry(13, 4, b"c"))


@pytest.mark.parametrize("resp", [
    FetchResponse(4, 1, 10, entries=ENTRIES, high_watermark=12),
    FetchResponse(4, 1, 10, high_watermark=9),
    FetchResponse(5, 2, 10, fenced=True),
    FetchResponse(4, 1, 10, high_watermark=9, diverging_epoch=2, diverging_end_offset=8),
    FetchResponse(4, 1, 10, high_watermark=9, diverging_epoch=-1, diverging_end_offset=0),
    FetchResponse(4, 1, 3, high_watermark=30, snapshot_end_offset=25),
])
def test_fetch(resp: FetchResponse) -> None:
    req = FetchRequest(4, 2, 10, 3)
    wire = _bytes_round_trip(wc.fetch_request_to_wire(req, "c1"), 16)
    assert wc.fetch_request_from_wire(wire, 16) == req
    back = wc.fetch_response_from_wire(_bytes_round_trip(wc.fetch_response_to_wire(resp), 16), resp.fetch_offset)
    assert back == resp


def test_fetch_of_another_topic_is_refused() -> None:
    wire = wc.fetch_request_to_wire(FetchRequest(1, 2, 0, -1), "c1")
    other = type(wire)(**{**{f: getattr(wire, f) for f in wire.__dataclass_fields__},
                          "topics": [type(wire.topics[0])(topic="t", topic_id=wc.uuid.UUID(int=7),
                                                          partitions=wire.topics[0].partitions)]})
    with pytest.raises(wc.WireFormatError):
        wc.fetch_request_from_wire(other, 16)


def test_fetch_snapshot() -> None:
    req = FetchSnapshotRequest(4, 2, 25)
    assert wc.fetch_snapshot_request_from_wire(
        _bytes_round_trip(wc.fetch_snapshot_request_to_wire(req, "c1"), 1)) == req
    for resp in (FetchSnapshotResponse(4, 1, Snapshot(25, 3, b"state")), FetchSnapshotResponse(4, 1, None)):
        assert wc.fetch_snapshot_response_from_wire(
            _bytes_round_trip(wc.fetch_snapshot_response_to_wire(resp), 1)) == resp


@pytest.mark.parametrize("version", [0, 1])
def test_end_quorum_epoch(version: int) -> None:
    from broker.quorum.messages import EndQuorumEpoch  # noqa: PLC0415

    m = EndQuorumEpoch(5, 1, (3, 2))
    assert wc.end_epoch_from_wire(_bytes_round_trip(wc.end_epoch_to_wire(m, "c1"), version), version) == m
