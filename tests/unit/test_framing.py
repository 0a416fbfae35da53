"""protocol/framing.py: the one framer the listener, the broker's connections and the client share."""

from __future__ import annotations

import struct

import pytest

from protocol.framing import (
    FrameError,
    FrameReader,
    common_version,
    encode_request,
    encode_response,
    open_response,
    response_correlation_id,
)
from protocol.headers import RequestHeader, read_request_header
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from protocol.primitives import DecodeError, Reader


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def test_frames_come_out_whole_however_the_bytes_are_cut() -> None:
    bodies = [b"a" * 9, b"", b"bc" * 300, b"d" * 8]
    stream = b"".join(_frame(b) for b in bodies)
    for cut in (1, 2, 3, 5, 7, 64, len(stream)):
        r = FrameReader()
        out = [f for i in range(0, len(stream), cut) for f in r.feed(stream[i:i + cut])]
        assert out == bodies, cut
        assert r.buffered == 0


def test_a_size_outside_the_limits_is_refused_after_the_frames_before_it() -> None:
    r = FrameReader(min_size=8, max_size=100)
    with pytest.raises(FrameError) as e:
        r.feed(_frame(b"x" * 10) + struct.pack(">i", 101) + b"y" * 101)
    assert e.value.size == 101 and e.value.complete == [b"x" * 10]
    with pytest.raises(FrameError) as e:
        FrameReader(min_size=8).feed(_frame(b"short"))
    assert e.value.size == 5 and e.value.complete == []
    with pytest.raises(FrameError):
        FrameReader().feed(struct.pack(">i", -1))


def test_a_request_frame_reads_back_as_the_listener_reads_it() -> None:
    msg = MetadataRequest(topics=None)
    frame = encode_request(msg, 12, 77, "me")
    (body,) = FrameReader().feed(frame)
    r = Reader(body)
    header = read_request_header(r, MetadataRequest.FLEXIBLE)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 12, 77, "me")
    assert MetadataRequest.read(r, 12) == msg


@pytest.mark.parametrize("client_id", ["me", None, "clïent-中"])
@pytest.mark.parametrize(("version", "flexible"), [(8, False), (12, True)])
def test_frames_are_the_header_kafka_defines_then_the_body(client_id: str | None, version: int,
                                                          flexible: bool) -> None:
    """Request header v1 (v2 adds an empty tagged-field section), response header v0 (v1 likewise),
    byte for byte; a request header cut anywhere is a DecodeError, never another exception."""
    msg = MetadataRequest(topics=[MetadataRequestTopic(name="t")])
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode())) + client_id.encode()
    head = struct.pack(">hhi", 3, version, 77) + cid + (b"\x00" if flexible else b"")
    assert encode_request(msg, version, 77, client_id) == _frame(head + msg.encode(version))
    resp = MetadataResponse(brokers=[], topics=[])
    assert encode_response(RequestHeader(3, version, 9, client_id), resp) == _frame(
        struct.pack(">i", 9) + (b"\x00" if flexible else b"") + resp.encode(version))
    body = head + msg.encode(version)
    r = Reader(body)
    assert read_request_header(r, MetadataRequest.FLEXIBLE) == RequestHeader(3, version, 77, client_id)
    assert r.pos == len(head)
    for n in range(len(head)):
        with pytest.raises(DecodeError):
            read_request_header(Reader(body[:n]), MetadataRequest.FLEXIBLE)


@pytest.mark.parametrize("version", [0, 3])
def test_api_versions_is_answered_with_the_v0_response_header_at_any_version(version: int) -> None:
    """KIP-511: the client must be able to read ApiVersions' answer before it knows the version
    the broker speaks, so its response header is never the flexible one."""
    resp = ApiVersionsResponse(error_code=0, api_keys=[])
    frame = encode_response(RequestHeader(18, version, 5, "c"), resp)
    (body,) = FrameReader().feed(frame)
    assert response_correlation_id(body) == 5
    r = open_response(body, 18, version, ApiVersionsRequest.is_flexible(version))
    assert r.pos == 4  # no tagged-field section after the correlation id
    assert ApiVersionsResponse.read(r, version) == resp


def test_a_flexible_response_header_is_read_past() -> None:
    resp = MetadataResponse(brokers=[], topics=[])
    (body,) = FrameReader().feed(encode_response(RequestHeader(3, 12, 9, "c"), resp))
    r = open_response(body, 3, 12, True)
    assert r.pos == 5 and MetadataResponse.read(r, 12) == resp


def test_the_common_version_is_the_highest_both_speak() -> None:
    assert common_version((0, 12), (3, 9)) == 9
    assert common_version((4, 7), (0, 12)) == 7
    assert common_version((4, 7), (8, 12)) is None
    assert common_version((4, 7), (0, 3)) is None
    assert common_version((0, 7), None) is None
