"""One connection's authentication, sans I/O: what a listener lets through before the peer has
said who it is, the SASL exchange, and whom the broker then trusts as a broker.

The connection layer (broker/connection.py) feeds it requests and tokens and does what it says:
answer, answer then close, or answer late then close (a failed login, so that guessing passwords
is slow). Kafka's rules: on a SASL listener nothing but ApiVersions, SaslHandshake and
SaslAuthenticate is served until the exchange succeeds; a SaslHandshake at v0 means the tokens
follow as bare size-prefixed frames (older clients), at v1 inside SaslAuthenticate. On an SSL
listener the client certificate, if any, names the principal; on a PLAINTEXT one nobody is named.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode
from protocol.messages.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from .listeners import ListenerSpec
from .sasl import AuthenticationFailed, SaslAuthenticator

ANONYMOUS = "User:ANONYMOUS"
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
# on a listener for brokers only (the controller listener), what anyone authenticated may still ask
OPEN_TO_ALL = BEFORE_AUTHENTICATION | {55}  # DescribeQuorum: admin tools ask it


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """What a listener's connections need to authenticate their peers."""

    spec: ListenerSpec
    authenticator: Callable[[], SaslAuthenticator] | None = None  # a fresh one per connection (SASL)
    super_users: frozenset[str] = frozenset()  # the principals trusted as brokers
    failed_delay_s: float = 0.1
    brokers_only: bool = False  # the controller listener: only brokers may ask what is not OPEN_TO_ALL


@dataclass(slots=True)
class Reply:
    """What to send for a SASL request or token: a response (or the bare bytes of a v0 token),
    and whether to close the connection once it is sent — at once, or after `delay_s`."""

    response: SaslHandshakeResponse | SaslAuthenticateResponse | None = None
    raw: bytes | None = None
    close: bool = False
    delay_s: float = 0.0
    reason: str = ""


@dataclass(slots=True)
class AuthSession:
    security: ListenerSecurity
    principal: str = ANONYMOUS
    authenticated: bool = False
    raw_tokens: bool = False  # after a v0 SaslHandshake the tokens come as bare frames
    _sasl: SaslAuthenticator | None = field(default=None)

    @classmethod
    def start(cls, security: ListenerSecurity, certificate_principal: str | None) -> AuthSession:
        """A new connection's session; `certificate_principal`: the client certificate's subject
        (TLS listeners), which is the principal on an SSL listener."""
        spec = security.spec
        if spec.sasl:
            assert security.authenticator is not None
            return cls(security, _sasl=security.authenticator())
        principal = certificate_principal if spec.tls and certificate_principal else ANONYMOUS
        return cls(security, principal, authenticated=True)

    @property
    def trusted_broker(self) -> bool:
        """May this peer do what only brokers do? On a listener that names nobody (PLAINTEXT),
        anyone who can reach it, as before there was security; on a secured one, the super users."""
        if not self.security.spec.secured:
            return True
        return self.authenticated and self.principal in self.security.super_users

    def allows(self, api_key: int) -> bool:
        """May this request be read at all now? (Anything else closes the connection, as Kafka's
        SASL server does with a request out of turn.)"""
        return self.authenticated or api_key in BEFORE_AUTHENTICATION

    def refuses(self, api_key: int) -> bool:
        """Is this a request only brokers may make, from a peer that is not one? It gets
        CLUSTER_AUTHORIZATION_FAILED."""
        return self.security.brokers_only and api_key not in OPEN_TO_ALL and not self.trusted_broker

    def handshake(self, mechanism: str, version: int) -> Reply:
        sasl = self._sasl
        if sasl is None:  # not a SASL listener (the handler in broker/apis answers after authentication)
            return Reply(SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[]))
        code = sasl.handshake(mechanism)
        reply = Reply(SaslHandshakeResponse(error_code=code, mechanisms=list(sasl.enabled)))
        if code:
            reply.close, reply.reason = True, f"SASL handshake refused: mechanism {mechanism!r}"
        elif version == 0:
            self.raw_tokens = True
        return reply

    def token(self, data: bytes, version: int | None) -> Reply:
        """A SASL token: from a SaslAuthenticate at `version`, or bare (None) after a v0 handshake."""
        sasl = self._sasl
        if sasl is None or (version is not None and self.raw_tokens):
            return self._fail(ErrorCode.ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate", version, delay=False)
        try:
            out = sasl.step(data)
        except AuthenticationFailed as e:
            return self._fail(ErrorCode.SASL_AUTHENTICATION_FAILED, str(e), version)
        if sasl.principal is not None:
            self.principal, self.authenticated, self.raw_tokens = sasl.principal, True, False
        if version is None:
            return Reply(raw=out)
        return Reply(SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=out, session_lifetime_ms=0))

    def _fail(self, code: int, message: str, version: int | None, delay: bool = True) -> Reply:
        delay_s = self.security.failed_delay_s if delay else 0.0
        if version is None:  # a bare token has no way to carry an error: the connection just closes
            return Reply(close=True, delay_s=delay_s, reason=message)
        return Reply(SaslAuthenticateResponse(error_code=code, error_message=message, auth_bytes=b"",
                                              session_lifetime_ms=0), close=True, delay_s=delay_s, reason=message)
