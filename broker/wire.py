"""A small async Kafka connection built on protocol/ only, for the broker's own outgoing requests.

The broker never imports the bundled client (docs/architecture.md §1): the CLI, and later the marker sender
and replica fetchers, talk to brokers through this. One connection pipelines requests and matches
answers by order, as Kafka guarantees; versions are negotiated once with ApiVersions.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from protocol.framing import (
    FrameReader,
    common_version,
    encode_request,
    open_response,
    response_correlation_id,
)
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.registry import RESPONSES
from protocol.messages.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from protocol.schema import Message
from protocol.scram import BY_NAME, ScramClient, ScramError

from .resolver import open_connection

log = structlog.get_logger()
_READ_BYTES = 1 << 18  # what one read may take off the socket; frames are cut out of it

M = TypeVar("M", bound=Message)


class WireError(Exception):
    """The peer cannot serve the request (no common version, connection lost, timeout)."""


@dataclass(frozen=True, slots=True)
class WireSecurity:
    """How to reach a secured listener of another broker or a controller: over TLS with `tls`, and
    logged in with SASL `mechanism` (PLAIN, SCRAM-SHA-256/512) as `username` when one is given."""

    tls: ssl.SSLContext | None = None
    mechanism: str = ""
    username: str = ""
    password: str = ""


async def _login(conn: BrokerConnection, sec: WireSecurity, timeout: float) -> None:
    """SaslHandshake v1, then the tokens in SaslAuthenticate; a SCRAM server must prove it holds
    the credential (its signature), or this broker would talk to an impostor."""
    hs = await conn.request(SaslHandshakeRequest(mechanism=sec.mechanism), version=1, timeout=timeout)
    assert isinstance(hs, SaslHandshakeResponse)
    if hs.error_code:
        raise WireError(f"SASL mechanism {sec.mechanism} refused (error {hs.error_code}; offered: {hs.mechanisms})")

    async def step(token: bytes) -> bytes:
        resp = await conn.request(SaslAuthenticateRequest(auth_bytes=token), timeout=timeout)
        assert isinstance(resp, SaslAuthenticateResponse)
        if resp.error_code:
            raise WireError(f"SASL login as {sec.username!r} failed: {resp.error_message} (error {resp.error_code})")
        return bytes(resp.auth_bytes)

    if sec.mechanism == "PLAIN":
        await step(f"\0{sec.username}\0{sec.password}".encode())
        return
    mech = BY_NAME.get(sec.mechanism)
    if mech is None:
        raise WireError(f"SASL mechanism {sec.mechanism} is not one this broker speaks")
    client = ScramClient(mech, sec.username, sec.password)
    try:
        client.verify(await step(client.final(await step(client.first()))))
    except ScramError as e:
        raise WireError(f"SCRAM login as {sec.username!r} failed: {e}") from e


class BrokerConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._corr = itertools.count(1)
        self._pending: deque[tuple[int, type[Message], int, asyncio.Future[Any]]] = deque()
        self._versions: dict[int, tuple[int, int]] = {}
        self._closed = False
        peer = writer.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def connect(cls, host: str, port: int, *, client_id: str = "ketch", timeout: float = 10.0,
                      security: WireSecurity | None = None) -> BrokerConnection:
        sec = security or WireSecurity()
        try:
            reader, writer = await asyncio.wait_for(open_connection(host, port, sec.tls), timeout)
        except (OSError, TimeoutError) as e:  # ssl.SSLError is an OSError: a certificate refused
            raise WireError(f"cannot connect to {host}:{port}: {e}") from e
        conn = cls(reader, writer, client_id)
        try:
            resp = await conn.request(ApiVersionsRequest(), version=0, timeout=timeout)
            assert isinstance(resp, ApiVersionsResponse)
            conn._versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            if sec.mechanism:
                await _login(conn, sec, timeout)
        except BaseException:
            conn.close()
            raise
        return conn

    def version_for(self, cls: type[Message]) -> int:
        """The highest version both sides speak."""
        v = common_version(cls.VERSIONS, self._versions.get(cls.API_KEY))
        if v is None:
            lo, hi = cls.VERSIONS
            raise WireError(f"broker does not support API {cls.API_KEY} in versions {lo}-{hi}")
        return v

    async def request(self, msg: M, *, version: int | None = None, timeout: float = 30.0) -> Any:
        v = self.version_for(type(msg)) if version is None else version
        corr = next(self._corr)
        frame = encode_request(msg, v, corr, self._client_id)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((corr, type(msg), v, fut))
        self._writer.write(frame)
        try:
            async with asyncio.timeout(timeout):  # not wait_for: in 3.11 it adds a loop turn to every answer
                return await fut
        except TimeoutError as e:
            self.close()
            raise WireError(f"request {type(msg).__name__} timed out after {timeout}s") from e

    async def _read_loop(self) -> None:
        frames = FrameReader()
        try:
            while True:
                data = await self._reader.read(_READ_BYTES)
                if not data:
                    raise ConnectionResetError("closed by the peer")
                for frame in frames.feed(data):
                    self._answer(frame)
        except (ConnectionError, WireError) as e:
            err = e if isinstance(e, WireError) else WireError(f"connection lost: {e!r}")
            while self._pending:
                fut = self._pending.popleft()[3]
                if not fut.done():
                    fut.set_exception(err)
        finally:
            self._closed = True
            self._writer.close()

    def _answer(self, frame: bytes) -> None:
        """Hand a response frame to the request it answers: the oldest outstanding one, as a Kafka
        connection answers in order."""
        if not self._pending:
            raise WireError(f"an answer of {len(frame)} bytes to no request")
        corr, req_cls, version, fut = self._pending.popleft()
        try:
            got = response_correlation_id(frame)
            if got != corr:
                raise WireError(f"correlation id {got}, expected {corr}")
            r = open_response(frame, req_cls.API_KEY, version, req_cls.is_flexible(version))
            resp = RESPONSES[req_cls.API_KEY].read(r, version)
        except (ValueError, WireError) as e:  # undecodable or a stray answer: nothing after it can be trusted
            log.warning("malformed answer from a broker: connection closed", peer=self._peer,
                        request=req_cls.__name__, version=version, error=str(e))
            err = WireError(f"malformed {req_cls.__name__} answer: {e}")
            if not fut.done():
                fut.set_exception(err)
            raise err from e
        if not fut.done():
            fut.set_result(resp)

    @property
    def closed(self) -> bool:
        """The connection is gone (closed here, or the read loop ended on an error)."""
        return self._closed or self._read_task.done()

    def close(self) -> None:
        self._closed = True
        self._read_task.cancel()
        self._writer.close()
        while self._pending:
            fut = self._pending.popleft()[3]
            if not fut.done():
                fut.set_exception(WireError("connection closed"))


class Channel:
    """One purpose's connections to other brokers (markers, verification, ...): one per peer.

    Kafka gives each inter-broker purpose its own network client. A broker serves the transactional
    requests of one connection in order, so two purposes sharing a connection wait behind each other
    (a verification behind a marker that waits for the ISR), and one's timeout, which closes the
    connection, fails the other's request in flight. Callers that ask at once share one connect: a
    second connection to the same peer would let requests of one purpose overtake each other.
    """

    def __init__(self, address_of: Callable[[int], tuple[str, int] | None], client_id: str,
                 security: WireSecurity | None = None) -> None:
        self._address_of = address_of  # a broker's inter-broker address, None if unknown
        self._client_id = client_id
        self._security = security
        self._conns: dict[int, BrokerConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def connection(self, node: int) -> BrokerConnection:
        conn = self._conns.get(node)
        if conn is not None and not conn.closed:
            return conn
        async with self._locks.setdefault(node, asyncio.Lock()):
            conn = self._conns.get(node)
            if conn is None or conn.closed:
                addr = self._address_of(node)
                if addr is None:
                    raise WireError(f"no address for broker {node}")
                conn = await BrokerConnection.connect(addr[0], addr[1], client_id=self._client_id,
                                                      security=self._security)
                self._conns[node] = conn
            return conn

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
