"""One TCP connection to one broker: version negotiation, pipelined requests, a timeout on each.

Kafka answers the requests of a connection in the order they were sent, but we still match by
correlation id: a mismatch then means a broken peer, and is reported as such instead of handing
one request's answer to another. Many requests may be outstanding at once (pipelining); the
producer and the fetcher rely on that for throughput.

Versions: the first request is ApiVersions. We ask at the newest version we know; a broker that
does not know it answers UNSUPPORTED_VERSION with a v0 body listing its ranges (KIP-511), and we
ask again at the best version it offers. From then on every API is spoken at the highest version
both sides know, capped by CLIENT_MAX where a newer version would change the client's model
(e.g. Fetch v13 names topics by id only).

The broker package has its own smaller connection (broker/wire.py); this one is the client's and
imports nothing but protocol/.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from protocol.errors import ErrorCode
from protocol.framing import (
    FrameReader,
    common_version,
    encode_request,
    open_response,
    response_correlation_id,
)
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.registry import RESPONSES
from protocol.schema import Message

from .errors import ConnectionLostError, KafkaClientError, RequestTimedOutError, UnsupportedVersionError
from .security import Security

M = TypeVar("M", bound=Message)

_SIZE = struct.Struct(">i")
_READ_BYTES = 1 << 18  # what one read may take off the socket; frames are cut out of it
API_VERSIONS_KEY: Final = 18
CLIENT_SOFTWARE_NAME: Final = "ketch-python"
CLIENT_SOFTWARE_VERSION: Final = "0.1.0"

# Highest versions this client uses, where it is below the schema's maximum. Fetch v13+ and
# OffsetFetch v8+ change the request shape (topic ids, batched groups); AddPartitionsToTxn v4+ is
# broker-to-broker only; OffsetCommit v9 belongs to the KIP-848 group protocol. The classic group
# APIs stop at the versions librdkafka itself sends (JoinGroup 5, SyncGroup 3, Heartbeat 3,
# LeaveGroup 3): the newer ones only add the flexible encoding, KIP-800 reasons and KIP-814
# skip_assignment, none of which we use, and librdkafka's mock broker advertises them but drops
# the connection on a flexible JoinGroup and crashes on a flexible SyncGroup.
CLIENT_MAX: Final[dict[int, int]] = {1: 12, 9: 7, 8: 8, 11: 5, 12: 3, 13: 3, 14: 3, 24: 3}


@dataclass(slots=True)
class _Pending:
    future: asyncio.Future[Any]
    response_cls: type[Message] | None  # None: return the raw body (ApiVersions fallback)
    version: int
    api_key: int
    request_flexible: bool


class Connection:
    """A connection to `host:port`; use `await Connection.open(...)` to get a negotiated one."""

    def __init__(self, host: str, port: int, *, node_id: int = -1, client_id: str = "ketch-client",
                 request_timeout: float = 30.0, security: Security | None = None) -> None:
        self.security = security or Security()
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.versions: dict[int, tuple[int, int]] = {}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._corr = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._read_task: asyncio.Task[None] | None = None
        self._closed_error: KafkaClientError | None = None

    @classmethod
    async def open(cls, host: str, port: int, *, node_id: int = -1, client_id: str = "ketch-client",
                   request_timeout: float = 30.0, connect_timeout: float = 10.0,
                   security: Security | None = None) -> Connection:
        conn = cls(host, port, node_id=node_id, client_id=client_id, request_timeout=request_timeout,
                   security=security)
        await conn._connect(connect_timeout)
        return conn

    def __repr__(self) -> str:
        return f"<Connection node={self.node_id} {self.host}:{self.port}{' closed' if self.closed else ''}>"

    @property
    def closed(self) -> bool:
        return self._closed_error is not None

    async def _connect(self, timeout: float) -> None:
        try:
            tls = self.security.tls_context()
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, ssl=tls, server_hostname=self.host if tls else None),
                timeout)
        except (OSError, TimeoutError) as e:
            self._closed_error = ConnectionLostError(f"cannot connect to {self.host}:{self.port}: {e!r}")
            raise self._closed_error from e
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())
        try:
            await self._negotiate(timeout)
            if self.security.sasl:
                await self.security.login(self)
        except BaseException:
            self.close()
            raise

    async def _negotiate(self, timeout: float) -> None:
        version = ApiVersionsRequest.VERSIONS[1]
        for _ in range(3):
            req = ApiVersionsRequest(client_software_name=CLIENT_SOFTWARE_NAME,
                                     client_software_version=CLIENT_SOFTWARE_VERSION)
            body = await self._send(req, version, None, timeout)
            assert isinstance(body, bytes)
            error = _SIZE.unpack_from(b"\x00\x00" + body[:2])[0]
            if error == ErrorCode.UNSUPPORTED_VERSION:
                if version == 0:
                    break
                # KIP-511: the answer should be a v0 body listing what the broker speaks. Not every
                # implementation gets that body right (librdkafka's mock encodes it differently), so
                # when it does not parse we fall back to v0, which every broker answers.
                try:
                    resp = ApiVersionsResponse.decode(body, 0)
                    theirs = {k.api_key: k.max_version for k in resp.api_keys}
                    version = max(0, min(theirs.get(API_VERSIONS_KEY, 0), version - 1))
                except ValueError:  # DecodeError, or text that is not UTF-8
                    version = 0
                continue
            resp = ApiVersionsResponse.decode(body, version)
            if resp.error_code:
                raise UnsupportedVersionError(f"ApiVersions failed on {self.host}:{self.port}", resp.error_code)
            self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            return
        raise UnsupportedVersionError(f"no common ApiVersions version with {self.host}:{self.port}")

    # ------------------------------------------------------------------ versions
    def supports(self, cls: type[Message]) -> bool:
        try:
            self.version_for(cls)
        except UnsupportedVersionError:
            return False
        return True

    def version_for(self, cls: type[Message], max_version: int | None = None,
                    versions: tuple[int, int] | None = None) -> int:
        """The highest version both sides speak (and at most `max_version`); `versions` replaces
        the client's usual range (KIP-848 members need OffsetCommit/OffsetFetch v9, past CLIENT_MAX)."""
        theirs = self.versions.get(cls.API_KEY)
        if versions is not None:
            lo, hi = versions
        else:
            lo, hi = cls.VERSIONS
            hi = min(hi, CLIENT_MAX.get(cls.API_KEY, hi))
        if max_version is not None:
            hi = min(hi, max_version)
        v = common_version((lo, hi), theirs)
        if v is None:
            raise UnsupportedVersionError(
                f"broker {self.host}:{self.port} speaks {cls.__name__} {theirs}, this client {lo}-{hi}")
        return v

    # ------------------------------------------------------------------ requests
    async def request(self, msg: Message, *, version: int | None = None, timeout: float | None = None,
                      expect_response: bool = True) -> Any:
        """Send `msg` and return the decoded response (None when `expect_response` is False,
        which is only right for acks=0 produce: the broker sends nothing back)."""
        v = self.version_for(type(msg)) if version is None else version
        resp_cls = RESPONSES[msg.API_KEY] if expect_response else None
        return await self._send(msg, v, resp_cls, self.request_timeout if timeout is None else timeout,
                                expect_response=expect_response)

    async def _send(self, msg: Message, version: int, resp_cls: type[Message] | None, timeout: float,
                    *, expect_response: bool = True) -> Any:
        if self._closed_error is not None:
            raise ConnectionLostError(f"connection to {self.host}:{self.port} is closed") from self._closed_error
        assert self._writer is not None
        corr = next(self._corr)
        frame = encode_request(msg, version, corr, self.client_id)
        fut: asyncio.Future[Any] | None = None
        if expect_response:
            fut = asyncio.get_running_loop().create_future()
            self._pending[corr] = _Pending(fut, resp_cls, version, msg.API_KEY, msg.is_flexible(version))
        try:
            self._writer.write(frame)
            async with asyncio.timeout(timeout):  # 3.11's wait_for would make a task of each drain
                await self._writer.drain()
        except (OSError, TimeoutError) as e:
            self._fail(ConnectionLostError(f"write to {self.host}:{self.port} failed: {e!r}"))
            raise ConnectionLostError(f"write to {self.host}:{self.port} failed: {e!r}") from e
        if fut is None:
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError as e:
            # the answers of a Kafka connection come in order: once one is lost the stream is useless
            err = RequestTimedOutError(f"{type(msg).__name__} to {self.host}:{self.port} timed out after {timeout}s")
            self._fail(err)
            raise err from e

    async def _read_loop(self) -> None:
        assert self._reader is not None
        reader = self._reader
        frames = FrameReader()
        try:
            while True:
                data = await reader.read(_READ_BYTES)
                if not data:
                    raise ConnectionResetError("closed by the broker")
                for frame in frames.feed(data):
                    self._answer(frame)
        except (ConnectionError, OSError) as e:
            self._fail(ConnectionLostError(f"connection to {self.host}:{self.port} lost: {e!r}"))
        except KafkaClientError as e:
            self._fail(e)
        except asyncio.CancelledError:
            self._fail(ConnectionLostError(f"connection to {self.host}:{self.port} closed"))
            raise

    def _answer(self, frame: bytes) -> None:
        """Hand a response frame to the request it answers, by correlation id."""
        try:
            corr = response_correlation_id(frame)
        except ValueError as e:
            raise ConnectionLostError(f"unreadable response from {self.host}:{self.port}: {e}") from e
        p = self._pending.pop(corr, None)
        if p is None:
            raise ConnectionLostError(f"response with unknown correlation id {corr}")
        if p.future.done():
            return
        try:
            r = open_response(frame, p.api_key, p.version, p.request_flexible)
            if p.response_cls is None:
                p.future.set_result(frame[r.pos:])
                return
            p.future.set_result(p.response_cls.read(r, p.version))
        except Exception as e:  # a response we cannot parse: that request fails, not the stream
            name = "response" if p.response_cls is None else p.response_cls.__name__
            p.future.set_exception(KafkaClientError(f"cannot decode {name}: {e!r}"))

    def _fail(self, err: KafkaClientError) -> None:
        if self._closed_error is None:
            self._closed_error = err
        pending, self._pending = self._pending, {}
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(ConnectionLostError(str(err)))
                p.future.exception()  # retrieved: its waiter may have timed out and gone
        if self._writer is not None:
            self._writer.close()
        task = self._read_task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()

    def close(self) -> None:
        """Close now; every outstanding request fails with ConnectionLostError."""
        self._fail(ConnectionLostError(f"connection to {self.host}:{self.port} closed by the client"))

    @property
    def in_flight(self) -> int:
        return len(self._pending)
