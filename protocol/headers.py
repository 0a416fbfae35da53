"""Request and response headers, and the framing rule that picks their versions.

Request header v1 carries a classic (non-compact) client id even in v2; v2 adds tagged fields.
Response header v1 adds tagged fields, except that ApiVersions always answers with header v0 so
that a client can read the answer before it knows which versions we speak.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .primitives import DecodeError, Reader, Writer

API_VERSIONS_KEY = 18
_REQUEST_HEAD = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def read_request_header(r: Reader, flexible_from: int | None) -> RequestHeader:
    """Read a request header; `flexible_from` is the first flexible version of the request's API
    (None when unknown: we then read v1, the most a non-flexible client sends)."""
    buf, p, end = r.buf, r.pos, r.end
    if p + 10 > end:  # the fixed part and the client id's length, read at once: every request has them
        raise DecodeError(f"need 10 bytes at {p}, have {end - p}")
    api_key, api_version, correlation_id, n = _REQUEST_HEAD.unpack_from(buf, p)
    p += 10
    client_id = None
    if n >= 0:
        if p + n > end:
            raise DecodeError(f"need {n} bytes at {p}, have {end - p}")
        client_id = buf[p:p + n].tobytes().decode()
        p += n
    r.pos = p
    if flexible_from is not None and api_version >= flexible_from:
        for _ in range(r.uvarint()):  # header tagged fields: none defined that we use
            r.uvarint()
            r.pos += r.uvarint()
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def request_header_bytes(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                         flexible: bool) -> bytes:
    """Header v1 (client id a classic nullable string), v2 when flexible (no tagged fields)."""
    cid = b"" if client_id is None else client_id.encode()
    head = _REQUEST_HEAD.pack(api_key, api_version, correlation_id, -1 if client_id is None else len(cid)) + cid
    return head + b"\x00" if flexible else head


def write_request_header(w: Writer, h: RequestHeader, flexible: bool) -> None:
    w.buf += request_header_bytes(h.api_key, h.api_version, h.correlation_id, h.client_id, flexible)


def response_header_flexible(api_key: int, flexible: bool) -> bool:
    return flexible and api_key != API_VERSIONS_KEY


def response_header_bytes(correlation_id: int, flexible: bool) -> bytes:
    """Header v0 (the correlation id), v1 when flexible (no tagged fields)."""
    head = _I32.pack(correlation_id)
    return head + b"\x00" if flexible else head


def write_response_header(w: Writer, correlation_id: int, flexible: bool) -> None:
    w.buf += response_header_bytes(correlation_id, flexible)


def read_response_header(r: Reader, flexible: bool) -> int:
    correlation_id = r.int32()
    if flexible:
        for _ in range(r.uvarint()):
            r.uvarint()
            r.pos += r.uvarint()
    return correlation_id
