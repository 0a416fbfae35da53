"""The broker's half of SASL, sans I/O: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802/7677).

A connection on a SASL listener owns one SaslAuthenticator: it is told the mechanism the client
names (SaslHandshake), then fed each of the client's tokens and returns the reply to send; once
the exchange is over `principal` says who the client is. A failure is an AuthenticationFailed
whose message may go to the client: it never says whether the user exists or the password was
wrong (an unknown SCRAM user is walked through the exchange with a made-up credential, RFC 5802
§5.1, and fails only at the proof, as a wrong password does). The connection layer
(broker/connection.py) does the sockets and the delay before it closes.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable, Mapping, Sequence

from protocol.errors import ErrorCode
from protocol.scram import (
    BY_NAME,
    ScramCredential,
    ScramError,
    ScramMechanism,
    attributes,
    b64,
    nonce,
    unb64,
    unescape_name,
    xor,
)

PLAIN = "PLAIN"
MECHANISMS = (PLAIN, *BY_NAME)  # what this broker implements
FAILED = "Authentication failed: invalid credentials with SASL mechanism {}"

# (user name, mechanism) -> the user's credential, None if it has none
ScramLookup = Callable[[str, ScramMechanism], ScramCredential | None]


class AuthenticationFailed(Exception):
    """The client did not prove who it is; the message is safe to send it."""


class _Plain:
    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user, password = (p.decode(errors="replace") for p in parts)
        if not user or not password:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: empty user name or password")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: client requested an authorization id "
                                       "that is different from the user name")
        expected = self._users.get(user)
        # compared in constant time whether or not the user exists
        ok = hmac.compare_digest(password.encode(), (expected if expected is not None else "\0" + password).encode())
        if not ok or expected is None:
            raise AuthenticationFailed(FAILED.format(PLAIN))
        return b"", user


class _Scram:
    """RFC 5802's server: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mech: ScramMechanism, lookup: ScramLookup, server_nonce: Callable[[], str],
                 fake_key: bytes) -> None:
        self.mech = mech
        self._lookup = lookup
        self._server_nonce = server_nonce
        self._fake_key = fake_key
        self._state = "first"
        self._user = ""
        self._known = False
        self._cred: ScramCredential | None = None
        self._first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def _fail(self) -> AuthenticationFailed:
        return AuthenticationFailed(FAILED.format(self.mech.name))

    def _fake(self, user: str) -> ScramCredential:
        """A credential for a user that has none, the same at every attempt (so the salt does not
        give away that the user is unknown), that no password matches."""
        salt = self.mech.hmac(self._fake_key, user.encode())[:32]
        return ScramCredential(salt, secrets.token_bytes(len(salt)), secrets.token_bytes(len(salt)),
                               self.mech.min_iterations)

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SCRAM message: not UTF-8") from None
        try:
            if self._state == "first":
                return self._client_first(text), None
            if self._state == "final":
                return self._client_final(text)
        except ScramError as e:
            raise AuthenticationFailed(f"Invalid SCRAM message: {e}") from None
        raise AuthenticationFailed("SCRAM exchange already finished")

    def _client_first(self, text: str) -> bytes:
        gs2, sep, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep or not sep2 or gs2 not in ("n", "y"):
            # 'p=': channel binding, which Kafka does not do either
            raise ScramError("unsupported GS2 header (no channel binding is supported)")
        a = attributes(bare)
        if "m" in a or "n" not in a or "r" not in a or not a["r"]:
            raise ScramError("malformed client-first-message")
        user = unescape_name(a["n"])
        if authzid and authzid != f"a={a['n']}":
            raise AuthenticationFailed("Authentication failed: the authorization id must be the user name")
        cred = self._lookup(user, self.mech)
        self._known = cred is not None
        self._cred = cred if cred is not None else self._fake(user)
        self._user = user
        self._first_bare = bare
        self._nonce = a["r"] + self._server_nonce()
        self._server_first = f"r={self._nonce},s={b64(self._cred.salt)},i={self._cred.iterations}"
        self._state = "final"
        self._gs2 = f"{gs2},{authzid},"
        return self._server_first.encode()

    def _client_final(self, text: str) -> tuple[bytes, str]:
        self._state = "done"
        without_proof, sep, proof_attr = text.rpartition(",p=")
        if not sep:
            raise ScramError("no proof in client-final-message")
        a = attributes(without_proof)
        if a.get("r") != self._nonce:
            raise AuthenticationFailed(f"Invalid SCRAM message: the nonce is not this exchange's ({self.mech.name})")
        if unb64(a.get("c", "")) != self._gs2.encode():
            raise ScramError("channel binding does not match the GS2 header")
        assert self._cred is not None
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        signature = self.mech.hmac(self._cred.stored_key, auth_message)
        proof = unb64(proof_attr)
        if len(proof) != len(signature):
            raise self._fail()
        client_key = xor(proof, signature)
        if not hmac.compare_digest(self.mech.h(client_key), self._cred.stored_key) or not self._known:
            raise self._fail()
        server_signature = self.mech.hmac(self._cred.server_key, auth_message)
        return f"v={b64(server_signature)}".encode(), self._user


class SaslAuthenticator:
    """One connection's authentication: `handshake(mechanism)`, then `step(token)` until
    `principal` is set ("User:<name>"), or AuthenticationFailed."""

    def __init__(self, enabled: Sequence[str], plain_users: Mapping[str, str], scram: ScramLookup,
                 server_nonce: Callable[[], str] = nonce, fake_key: bytes = b"") -> None:
        self.enabled = [m for m in enabled if m in MECHANISMS]
        self._plain_users = plain_users
        self._scram = scram
        self._server_nonce = server_nonce
        self._fake_key = fake_key or secrets.token_bytes(32)
        self._mechanism: _Plain | _Scram | None = None
        self.mechanism_name: str | None = None
        self.principal: str | None = None

    def handshake(self, mechanism: str) -> int:
        """The error code of SaslHandshake's answer: 0, UNSUPPORTED_SASL_MECHANISM, or
        ILLEGAL_SASL_STATE for a second handshake."""
        if self._mechanism is not None or self.principal is not None:
            return ErrorCode.ILLEGAL_SASL_STATE
        if mechanism not in self.enabled:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        self.mechanism_name = mechanism
        self._mechanism = (_Plain(self._plain_users) if mechanism == PLAIN else
                           _Scram(BY_NAME[mechanism], self._scram, self._server_nonce, self._fake_key))
        return 0

    def step(self, token: bytes) -> bytes:
        """The reply to one of the client's tokens; `principal` is set once it has proved who it is."""
        if self._mechanism is None or self.principal is not None:
            raise AuthenticationFailed("Unexpected SASL token: no handshake, or authentication already done")
        reply, user = self._mechanism.step(token)
        if user is not None:
            self.principal = f"User:{user}"
        return reply
