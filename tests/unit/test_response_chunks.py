"""A fetch's record batches go into its answer without being copied (issue 24: a fetched byte is
copied once, by the segment read): `response_chunks` gives the frame as the pieces of a vectored
write, with each large records payload the very object the read returned, and the pieces joined
are the frame `encode_response` writes."""

from __future__ import annotations

import os
import uuid

import pytest

from protocol.framing import encode_response, response_chunks
from protocol.headers import RequestHeader
from protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from protocol.messages.metadata import MetadataResponse
from protocol.primitives import SPLICE_MIN


def fetch_answer(version: int, *payloads: bytes | memoryview | None) -> FetchResponse:
    return FetchResponse(responses=[FetchableTopicResponse(topic="orders", topic_id=uuid.uuid4(), partitions=[
        PartitionData(partition_index=i, error_code=0, high_watermark=10, last_stable_offset=10, log_start_offset=0,
                      records=p) for i, p in enumerate(payloads)])])


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_large_batches_are_referred_to_and_the_frame_is_the_same(version: int) -> None:
    big = os.urandom(64 * 1024)
    view = memoryview(os.urandom(8 * 1024))[: 5 * 1024]  # a read that stopped before a partial batch
    small = os.urandom(SPLICE_MIN - 1)
    resp = fetch_answer(version, big, small, None, view)
    header = RequestHeader(1, version, 77, "c")
    chunks = response_chunks(header, resp)
    assert b"".join(chunks) == encode_response(header, resp)
    assert [c for c in chunks if c is big or c is view] == [big, view]  # the same objects: not copied
    assert not any(c is small for c in chunks)  # a small one is cheaper to copy than to send apart
    assert int.from_bytes(bytes(chunks[0][:4]), "big") == sum(map(len, chunks)) - 4


def test_an_answer_without_records_is_one_piece() -> None:
    header = RequestHeader(3, 12, 5, "c")
    resp = MetadataResponse(brokers=[], topics=[])
    chunks = response_chunks(header, resp)
    assert len(chunks) == 1 and bytes(chunks[0]) == encode_response(header, resp)
