"""Issue 27: a connection on a SASL listener, driven through the connection layer with an
in-memory transport: nothing but ApiVersions/SaslHandshake/SaslAuthenticate before the login, the
login (v1 in SaslAuthenticate, v0 as bare tokens) setting ClientInfo.principal, a failed login
answered SASL_AUTHENTICATION_FAILED only after the delay and then closed, and the controller
listener refusing broker-only requests to a principal that is not a broker."""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

from helpers.wait import wait_until_async

from broker.apis import ApiTable
from broker.connection import Connection, ConnectionRegistry
from broker.context import ClientInfo
from broker.metrics import BrokerMetrics
from broker.security.listeners import ListenerSpec
from broker.security.sasl import SaslAuthenticator
from broker.security.session import ListenerSecurity
from protocol.errors import ErrorCode
from protocol.framing import encode_request, open_response
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from protocol.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from protocol.messages.registry import RESPONSES
from protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from protocol.schema import Message
from protocol.scram import SCRAM_SHA_256, ScramClient, ScramCredential

ALICE = ScramCredential.from_password(SCRAM_SHA_256, "alice-pw")


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def write(self, data: bytes | bytearray | memoryview) -> None:  # type: ignore[override]
        self.written.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


seen: list[ClientInfo] = []


async def _handle(ctx: Any, client: ClientInfo, header: Any, req: Any) -> Message:
    seen.append(client)
    return RESPONSES[header.api_key]()


def _conn(protocol: str = "SASL_PLAINTEXT", brokers_only: bool = False, inter_broker: bool = False,
          delay: float = 0.3) -> tuple[Connection, _Transport]:
    keys = {18: (0, 3), 3: (0, 12), 17: (0, 1), 36: (0, 2), 63: (0, 1), 55: (0, 2)}
    table = ApiTable({k: _handle for k in keys}, keys, frozenset())
    security = ListenerSecurity(
        ListenerSpec("X", "127.0.0.1", 0, protocol),
        lambda: SaslAuthenticator(["PLAIN", "SCRAM-SHA-256"], {"broker": "b-pw", "carol": "c-pw"},
                                  lambda u, m: ALICE if u == "alice" else None),
        frozenset({"User:broker"}), delay, brokers_only)
    conn = Connection(object(), table, ConnectionRegistry(BrokerMetrics(), 1 << 20, 100, lambda _: None),
                      ("127.0.0.1", 9092), inter_broker, security=security)
    transport = _Transport()
    conn.connection_made(transport)
    return conn, transport


_corr = iter(range(1, 10_000))


async def _ask(conn: Connection, t: _Transport, msg: Message, version: int) -> Any:
    n = len(t.written)
    conn.data_received(encode_request(msg, version, next(_corr), "test"))
    await wait_until_async(lambda: len(t.written) > n or t.closed, message="an answer", timeout=5)
    if len(t.written) == n:
        return None
    frame = t.written[-1][4:]
    return RESPONSES[msg.API_KEY].read(open_response(frame, msg.API_KEY, version, msg.is_flexible(version)), version)


async def _plain_login(conn: Connection, t: _Transport, user: str, password: str) -> Any:
    hs = await _ask(conn, t, SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert hs.error_code == 0 and "SCRAM-SHA-256" in hs.mechanisms
    return await _ask(conn, t, SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()), 2)


async def test_nothing_but_the_login_before_authentication() -> None:
    conn, t = _conn()
    assert isinstance(await _ask(conn, t, ApiVersionsRequest(), 0), ApiVersionsResponse)
    conn.data_received(encode_request(DescribeQuorumRequest(), 0, 99, "test"))
    assert t.closed and conn.closed


async def test_plain_login_sets_the_principal() -> None:
    conn, t = _conn()
    resp = await _plain_login(conn, t, "carol", "c-pw")
    assert resp.error_code == 0 and conn.info.principal == "User:carol"
    seen.clear()
    await _ask(conn, t, DescribeQuorumRequest(), 0)
    assert seen[0].principal == "User:carol" and not seen[0].inter_broker
    assert (await _ask(conn, t, SaslHandshakeRequest(mechanism="PLAIN"), 1)).error_code == 0  # the handler's


async def test_scram_login_over_sasl_authenticate() -> None:
    conn, t = _conn()
    assert (await _ask(conn, t, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)).error_code == 0
    client = ScramClient(SCRAM_SHA_256, "alice", "alice-pw")
    first = await _ask(conn, t, SaslAuthenticateRequest(auth_bytes=client.first()), 1)
    final = await _ask(conn, t, SaslAuthenticateRequest(auth_bytes=client.final(first.auth_bytes)), 1)
    assert final.error_code == 0
    client.verify(final.auth_bytes)
    assert conn.info.principal == "User:alice"


async def test_failed_login_is_answered_after_the_delay_then_closed() -> None:
    conn, t = _conn(delay=0.3)
    await _ask(conn, t, SaslHandshakeRequest(mechanism="PLAIN"), 1)
    n = len(t.written)
    started = time.monotonic()
    conn.data_received(encode_request(SaslAuthenticateRequest(auth_bytes=b"\0carol\0wrong"), 2, 50, "test"))
    conn.data_received(encode_request(ApiVersionsRequest(), 0, 51, "test"))  # not read any more
    assert len(t.written) == n and not t.closed
    await wait_until_async(lambda: t.closed, message="closed after the delay", timeout=5)
    assert time.monotonic() - started >= 0.25
    assert len(t.written) == n + 1
    resp = RESPONSES[36].read(open_response(t.written[-1][4:], 36, 2, True), 2)
    assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and conn.info.principal == "User:ANONYMOUS"


async def test_unsupported_mechanism_is_answered_then_closed() -> None:
    conn, t = _conn()
    hs = await _ask(conn, t, SaslHandshakeRequest(mechanism="GSSAPI"), 1)
    assert hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM and t.closed


async def test_v0_handshake_takes_bare_tokens() -> None:
    """Older clients (handshake v0) send the tokens as bare size-prefixed frames, shorter than any
    request header, and get the server's tokens back the same way."""
    conn, t = _conn()
    assert (await _ask(conn, t, SaslHandshakeRequest(mechanism="PLAIN"), 0)).error_code == 0
    n = len(t.written)
    token = b"\0b\0x"  # 4 bytes: a wrong password, but first a well-framed one below
    conn2, t2 = _conn()
    await _ask(conn2, t2, SaslHandshakeRequest(mechanism="PLAIN"), 0)
    good = b"\0carol\0c-pw"
    conn2.data_received(struct.pack(">i", len(good)) + good)
    await wait_until_async(lambda: len(t2.written) == 2, message="the empty PLAIN answer")
    assert t2.written[-1] == b"\0\0\0\0" and conn2.info.principal == "User:carol"
    assert isinstance(await _ask(conn2, t2, ApiVersionsRequest(), 0), ApiVersionsResponse)  # framed again
    conn.data_received(struct.pack(">i", len(token)) + token)
    await wait_until_async(lambda: t.closed, message="closed after the delay", timeout=5)
    assert len(t.written) == n  # a bare token has no error to carry: just closed


async def test_controller_listener_refuses_broker_requests_from_non_brokers() -> None:
    conn, t = _conn(brokers_only=True)
    await _plain_login(conn, t, "carol", "c-pw")
    seen.clear()
    hb = await _ask(conn, t, BrokerHeartbeatRequest(broker_id=1), 1)
    assert isinstance(hb, BrokerHeartbeatResponse) and hb.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert seen == []  # the handler never ran
    assert isinstance(await _ask(conn, t, DescribeQuorumRequest(), 0), DescribeQuorumResponse)  # open to all
    broker, bt = _conn(brokers_only=True)
    await _plain_login(broker, bt, "broker", "b-pw")
    seen.clear()
    await _ask(broker, bt, BrokerHeartbeatRequest(broker_id=1), 1)
    assert len(seen) == 1


async def test_inter_broker_listener_trusts_only_super_users_once_secured() -> None:
    conn, t = _conn(inter_broker=True)
    assert not conn.info.inter_broker
    await _plain_login(conn, t, "carol", "c-pw")
    assert not conn.info.inter_broker
    broker, bt = _conn(inter_broker=True)
    await _plain_login(broker, bt, "broker", "b-pw")
    assert broker.info.inter_broker
    plain, _ = _conn("PLAINTEXT", inter_broker=True)
    assert plain.info.inter_broker and plain.info.principal == "User:ANONYMOUS"  # as before security
