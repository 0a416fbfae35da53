"""Kafka's connection framing, sans I/O: bytes in, frames out; messages in, frames out.

Every Kafka request and response is a frame: an int32 size, then that many bytes (the header and
the body). The broker's listener, the broker's own outgoing connections (broker/wire.py) and the
bundled client (client/connection.py) all speak it; this module is the one place that knows how,
with no sockets inside (h11's shape), so each of them only moves bytes.

Also here: the one rule for the version two peers speak (`common_version`).
"""

from __future__ import annotations

import struct

from .headers import (
    RequestHeader,
    read_response_header,
    request_header_bytes,
    response_header_bytes,
    response_header_flexible,
)
from .primitives import Buffer, DecodeError, Reader, Spliced
from .schema import Message

SIZE_PREFIX = 4
_SIZE = struct.Struct(">i")


class FrameError(ValueError):
    """A size prefix outside what this end accepts: the stream cannot be trusted past it."""

    def __init__(self, size: int, min_size: int, max_size: int | None, complete: list[bytes]) -> None:
        limit = f"{min_size}..{max_size}" if max_size is not None else f">= {min_size}"
        super().__init__(f"frame of {size} bytes (accepted: {limit})")
        self.size = size
        self.complete = complete  # the whole frames before the bad prefix, still to be handled


class FrameReader:
    """Whole frames out of a byte stream, fed in whatever pieces the transport delivers.

    `feed` returns the frames the bytes so far complete (their bodies, without the size prefix) and
    keeps the rest. A size below `min_size` or above `max_size` raises FrameError (carrying the
    frames before it): a broker refuses an oversized request before buffering it
    (socket.request.max.bytes), and a frame too short to hold a header is garbage, not a request."""

    __slots__ = ("_buf", "min_size", "max_size")

    def __init__(self, *, min_size: int = 0, max_size: int | None = None) -> None:
        self._buf = bytearray()
        self.min_size = min_size
        self.max_size = max_size

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos, n = 0, len(buf)
        lo, hi = self.min_size, self.max_size
        while n - pos >= SIZE_PREFIX:
            size = _SIZE.unpack_from(buf, pos)[0]
            if size < lo or (hi is not None and size > hi):
                del buf[:pos]
                raise FrameError(size, lo, hi, frames)
            end = pos + SIZE_PREFIX + size
            if end > n:
                break
            frames.append(bytes(buf[pos + SIZE_PREFIX:end]))
            pos = end
        if pos:
            del buf[:pos]
        return frames

    @property
    def buffered(self) -> int:
        """Bytes held back: the start of a frame not yet complete."""
        return len(self._buf)

    @property
    def pending_size(self) -> int | None:
        """The size the incomplete frame held back declares (a valid one: `feed` refused any
        other), or None while not even its size prefix is here: what finishing it will take."""
        if len(self._buf) < SIZE_PREFIX:
            return None
        return int(_SIZE.unpack_from(self._buf, 0)[0])


def encode_request(msg: Message, version: int, correlation_id: int, client_id: str | None) -> bytes:
    """The frame of `msg` at `version`, header and size prefix included."""
    b = bytearray(SIZE_PREFIX)  # the size, patched below
    b += request_header_bytes(msg.API_KEY, version, correlation_id, client_id, msg.is_flexible(version))
    msg.write_to(b, version)
    _SIZE.pack_into(b, 0, len(b) - SIZE_PREFIX)
    return bytes(b)


def encode_response(header: RequestHeader, resp: Message) -> bytes:
    """The frame answering the request with `header`, in one piece."""
    return b"".join(response_chunks(header, resp))


def response_chunks(header: RequestHeader, resp: Message) -> list[Buffer]:
    """The frame answering the request with `header`, as the pieces of a vectored write: large
    record payloads (a fetch's batches) are not copied into it but sent from where they lie."""
    b = Spliced(SIZE_PREFIX)
    b += response_header_bytes(header.correlation_id,
                               response_header_flexible(header.api_key, resp.is_flexible(header.api_version)))
    resp.write_to(b, header.api_version)
    _SIZE.pack_into(b, 0, b.total() - SIZE_PREFIX)
    return b.chunks()


def response_correlation_id(frame: bytes) -> int:
    """The correlation id a response frame answers (its first field in every header version)."""
    if len(frame) < 4:
        raise DecodeError(f"a response frame of {len(frame)} bytes has no correlation id")
    return int(_SIZE.unpack_from(frame)[0])


def open_response(frame: bytes, api_key: int, version: int, request_flexible: bool) -> Reader:
    """A reader positioned at the body of the response frame to a request (`api_key` at `version`);
    the header read past (ApiVersions answers with the v0 header whatever the request's)."""
    r = Reader(frame)
    read_response_header(r, response_header_flexible(api_key, request_flexible))
    return r


def common_version(ours: tuple[int, int], theirs: tuple[int, int] | None) -> int | None:
    """The highest version both ends speak of an API (`ours` and `theirs` as (min, max) ranges);
    None when the ranges do not meet or the peer does not list the API."""
    lo, hi = ours
    if theirs is None or theirs[1] < lo or theirs[0] > hi:
        return None
    return min(hi, theirs[1])
