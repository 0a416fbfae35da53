"""How the bundled client reaches a secured listener: TLS (standard library ssl), and a SASL login
— PLAIN or SCRAM-SHA-256/512 — right after the versions are negotiated, before anything else is
sent (the broker serves nothing else until then). A SCRAM login checks the server's signature:
a broker that does not hold the user's credential is refused (protocol/scram.py).

    Producer("host:9094", security=Security("SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
             sasl_username="alice", sasl_password="...", ssl_cafile="ca.pem"))
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from protocol.errors import ErrorCode
from protocol.messages.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from protocol.scram import BY_NAME, ScramClient, ScramError

from .errors import AuthenticationError


class _Connection(Protocol):
    """What a login needs of a connection (client/connection.py's, negotiated)."""

    host: str
    port: int

    async def request(self, msg: Any, *, version: int | None = None) -> Any: ...

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", *BY_NAME)


@dataclass(frozen=True, slots=True)
class Security:
    """Kafka's security.protocol, sasl.* and ssl.* client settings."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str = ""
    sasl_password: str = ""
    ssl_cafile: str | None = None  # the CA certificates to check the broker's against (default: the system's)
    ssl_certfile: str | None = None  # a client certificate, for listeners that ask for one (mTLS)
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool = True  # Kafka's ssl.endpoint.identification.algorithm=https
    ssl_context: ssl.SSLContext | None = None  # instead of the ssl_* files

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"security protocol must be one of {', '.join(PROTOCOLS)}, not {self.protocol!r}")
        if self.sasl and self.sasl_mechanism not in MECHANISMS:
            raise ValueError(f"SASL mechanism must be one of {', '.join(MECHANISMS)}, not {self.sasl_mechanism!r}")
        if self.sasl and not self.sasl_username:
            raise ValueError("a SASL protocol needs sasl_username and sasl_password")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def tls_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        if self.ssl_context is not None:
            return self.ssl_context
        ctx = ssl.create_default_context(cafile=self.ssl_cafile)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = self.ssl_check_hostname
        if self.ssl_certfile:
            ctx.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
        return ctx

    async def login(self, conn: _Connection) -> None:
        """SaslHandshake v1, then the mechanism's tokens in SaslAuthenticate; AuthenticationError
        if the broker refuses (its error after its delay) or proves nothing (SCRAM)."""
        hs = await conn.request(SaslHandshakeRequest(mechanism=self.sasl_mechanism), version=1)
        assert isinstance(hs, SaslHandshakeResponse)
        if hs.error_code:
            raise AuthenticationError(f"{self.sasl_mechanism} not enabled on {conn.host}:{conn.port} "
                                      f"(it offers {', '.join(hs.mechanisms)})", hs.error_code)

        async def step(token: bytes) -> bytes:
            resp = await conn.request(SaslAuthenticateRequest(auth_bytes=token))
            assert isinstance(resp, SaslAuthenticateResponse)
            if resp.error_code:
                raise AuthenticationError(resp.error_message or "", resp.error_code)
            return bytes(resp.auth_bytes)

        if self.sasl_mechanism == "PLAIN":
            await step(f"\0{self.sasl_username}\0{self.sasl_password}".encode())
            return
        client = ScramClient(BY_NAME[self.sasl_mechanism], self.sasl_username, self.sasl_password)
        try:
            client.verify(await step(client.final(await step(client.first()))))
        except ScramError as e:
            raise AuthenticationError(str(e), ErrorCode.SASL_AUTHENTICATION_FAILED) from e


# Kafka's (and librdkafka's) client property names -> Security's fields. The ssl.* locations are
# PEM files (the standard library's ssl reads no Java keystore).
PROPERTIES = {"security.protocol": "protocol", "sasl.mechanism": "sasl_mechanism",
              "sasl.username": "sasl_username", "sasl.password": "sasl_password",
              "ssl.ca.location": "ssl_cafile", "ssl.truststore.location": "ssl_cafile",
              "ssl.certificate.location": "ssl_certfile", "ssl.key.location": "ssl_keyfile"}
# ssl.endpoint.identification.algorithm: "https" checks the broker's host name, "" does not
HOSTNAME_CHECK = "ssl.endpoint.identification.algorithm"
# sasl.jaas.config, as Java clients (and Spark's Kafka connector) give a PLAIN or SCRAM login:
# `...LoginModule required username="alice" password="...";`
JAAS = "sasl.jaas.config"
_JAAS_FIELD = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def security_from_properties(props: Mapping[str, str]) -> Security:
    """Security from Kafka's client properties (`security.protocol`, `sasl.*`, `ssl.*`); a
    property it does not know is refused (ValueError) rather than ignored: a security setting
    silently dropped would connect with less than was asked for."""
    kw: dict[str, Any] = {}
    for key, value in props.items():
        key, value = key.strip().lower(), value.strip()
        if key in PROPERTIES:
            kw[PROPERTIES[key]] = value.upper() if key in ("security.protocol", "sasl.mechanism") else value
        elif key == HOSTNAME_CHECK:
            if value.lower() not in ("", "https"):
                raise ValueError(f"{HOSTNAME_CHECK} must be https or empty, not {value!r}")
            kw["ssl_check_hostname"] = value.lower() == "https"
        elif key == JAAS:
            fields = {m.group(1): m.group(2).replace('\\"', '"') for m in _JAAS_FIELD.finditer(value)}
            if set(fields) != {"username", "password"}:
                raise ValueError(f"{JAAS} must give username=\"...\" and password=\"...\"")
            kw["sasl_username"], kw["sasl_password"] = fields["username"], fields["password"]
        else:
            raise ValueError(f"{key!r} is not one of {', '.join([*PROPERTIES, HOSTNAME_CHECK, JAAS])}")
    return Security(**kw)
