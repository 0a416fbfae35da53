"""SaslHandshake (key 17) and SaslAuthenticate (key 36): a client names its SASL mechanism, then
its tokens travel in SaslAuthenticate (handshake v1) or as bare size-prefixed frames (v0, which
older clients still send)."""

from __future__ import annotations

from ..schema import BYTES, INT16, INT64, STRING, Array, Message, f, schema

HANDSHAKE_KEY = 17
AUTHENTICATE_KEY = 36


@schema
class SaslHandshakeRequest(Message):
    API_KEY = HANDSHAKE_KEY
    VERSIONS = (0, 1)
    FLEXIBLE = None
    mechanism: str = f(STRING)


@schema
class SaslHandshakeResponse(Message):
    API_KEY = HANDSHAKE_KEY
    VERSIONS = (0, 1)
    FLEXIBLE = None
    error_code: int = f(INT16)
    mechanisms: list[str] = f(Array(STRING))


@schema
class SaslAuthenticateRequest(Message):
    API_KEY = AUTHENTICATE_KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    auth_bytes: bytes = f(BYTES)


@schema
class SaslAuthenticateResponse(Message):
    API_KEY = AUTHENTICATE_KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    auth_bytes: bytes = f(BYTES)
    session_lifetime_ms: int = f(INT64, "1+")
