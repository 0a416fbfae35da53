"""Request and response headers, and the framing rule that picks their versions.

Request header v1 carries a classic (non-compact) client id even in v2; v2 adds tagged fields.
Response header v1 adds tagged fields, except that ApiVersions always answers with header v0 so
that a client can read the answer before it knows which versions we speak.
"""

from __future__ import annotations

from dataclasses import dataclass

from .primitives import Reader, Writer

API_VERSIONS_KEY = 18


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def read_request_header(r: Reader, flexible_from: int | None) -> RequestHeader:
    """Read a request header; `flexible_from` is the first flexible version of the request's API
    (None when unknown: we then read v1, the most a non-flexible client sends)."""
    api_key = r.int16()
    api_version = r.int16()
    correlation_id = r.int32()
    client_id = r.string()
    if flexible_from is not None and api_version >= flexible_from:
        for _ in range(r.uvarint()):  # header tagged fields: none defined that we use
            r.uvarint()
            r.pos += r.uvarint()
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def write_request_header(w: Writer, h: RequestHeader, flexible: bool) -> None:
    w.int16(h.api_key)
    w.int16(h.api_version)
    w.int32(h.correlation_id)
    w.string(h.client_id)
    if flexible:
        w.uvarint(0)


def response_header_flexible(api_key: int, flexible: bool) -> bool:
    return flexible and api_key != API_VERSIONS_KEY


def write_response_header(w: Writer, correlation_id: int, flexible: bool) -> None:
    w.int32(correlation_id)
    if flexible:
        w.uvarint(0)


def read_response_header(r: Reader, flexible: bool) -> int:
    correlation_id = r.int32()
    if flexible:
        for _ in range(r.uvarint()):
            r.uvarint()
            r.pos += r.uvarint()
    return correlation_id
