"""SCRAM (RFC 5802, with SHA-256 and SHA-512 as RFC 7677 and Kafka name them): the key
derivations both sides share, the message attributes, and the client's half of the exchange.

Sans I/O: the client is fed the server's messages and returns its own; the sockets are its
caller's. The broker's half is in broker/security/sasl.py; both use the derivations here, so a
credential the CLI salts is the one the broker checks.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass


class ScramError(Exception):
    """The exchange cannot go on: a malformed message, a wrong nonce or proof, a bad signature."""


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str  # as SaslHandshake names it
    type: int  # as UserScramCredentialRecord and AlterUserScramCredentials number it
    hash_name: str
    min_iterations: int = 4096  # Kafka's bounds for a credential's iteration count
    max_iterations: int = 16384

    def h(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)

    def client_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Client Key")

    def stored_key(self, client_key: bytes) -> bytes:
        return self.h(client_key)

    def server_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Server Key")


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
BY_NAME = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_TYPE = {m.type: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a server keeps of a user's password for one mechanism (RFC 5802 §3)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted(cls, mech: ScramMechanism, salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
        return cls(salt, mech.stored_key(mech.client_key(salted_password)), mech.server_key(salted_password),
                   iterations)

    @classmethod
    def from_password(cls, mech: ScramMechanism, password: str, iterations: int = 4096,
                      salt: bytes | None = None) -> ScramCredential:
        salt = secrets.token_bytes(32) if salt is None else salt
        return cls.from_salted(mech, salt, mech.salted_password(password, salt, iterations), iterations)


def xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as e:
        raise ScramError(f"not base64: {text!r}") from e


def escape_name(name: str) -> str:
    """A saslname (RFC 5802 §5.1): ',' and '=' escaped."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(text: str) -> str:
    if re.search("=(?!2C|3D)", text):
        raise ScramError(f"badly escaped name {text!r}")
    return text.replace("=2C", ",").replace("=3D", "=")


def attributes(message: str) -> dict[str, str]:
    """'a=1,b=2' -> {'a': '1', 'b': '2'} (values may hold '='); ScramError if malformed."""
    out: dict[str, str] = {}
    for part in message.split(","):
        key, eq, value = part.partition("=")
        if not eq or len(key) != 1 or key in out:
            raise ScramError(f"malformed SCRAM attribute {part!r}")
        out[key] = value
    return out


def nonce() -> str:
    """A printable nonce without ',' (RFC 5802's c-nonce / s-nonce)."""
    return secrets.token_urlsafe(24)


class ScramClient:
    """The client side: `first()`, then `final(server_first)`, then `verify(server_final)`, which
    raises unless the server proved it holds the user's ServerKey (it is not an impostor)."""

    def __init__(self, mech: ScramMechanism, username: str, password: str, client_nonce: str | None = None) -> None:
        self.mech = mech
        self._username = username
        self._password = password
        self._nonce = client_nonce or nonce()
        self._first_bare = f"n={escape_name(username)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        return ("n,," + self._first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode(errors="replace")
        a = attributes(text)
        if "e" in a:
            raise ScramError(f"server refused: {a['e']}")
        try:
            server_nonce, salt, iterations = a["r"], unb64(a["s"]), int(a["i"])
        except (KeyError, ValueError) as e:
            raise ScramError(f"malformed server-first-message {text!r}") from e
        if not server_nonce.startswith(self._nonce) or server_nonce == self._nonce:
            raise ScramError("the server's nonce does not extend ours")
        if not self.mech.min_iterations <= iterations <= self.mech.max_iterations:
            raise ScramError(f"iteration count {iterations} outside "
                             f"{self.mech.min_iterations}-{self.mech.max_iterations}")
        without_proof = f"c={b64(b'n,,')},r={server_nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        salted = self.mech.salted_password(self._password, salt, iterations)
        client_key = self.mech.client_key(salted)
        signature = self.mech.hmac(self.mech.stored_key(client_key), auth_message)
        self._server_signature = self.mech.hmac(self.mech.server_key(salted), auth_message)
        return f"{without_proof},p={b64(xor(client_key, signature))}".encode()

    def verify(self, server_final: bytes) -> None:
        a = attributes(server_final.decode(errors="replace"))
        if "e" in a:
            raise ScramError(f"server refused: {a['e']}")
        if self._server_signature is None or "v" not in a:
            raise ScramError("no server signature")
        if not hmac.compare_digest(unb64(a["v"]), self._server_signature):
            raise ScramError("the server's signature is wrong: it does not know this user's credential")
