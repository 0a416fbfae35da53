"""TLS from the standard library: the listeners' context, the context of the broker's own
connections to other brokers, and the principal a client certificate names.

TLS 1.2 is the oldest version offered (Kafka's default ssl.enabled.protocols is TLSv1.2,TLSv1.3).
With `ssl_client_auth` "required" a client without a certificate the truststore vouches for is
refused in the handshake; "requested" takes one if offered. A client certificate's subject is the
principal, as Kafka's default principal builder makes it: "User:" and the subject's distinguished
name in RFC 2253's order and form (CN first), e.g. "User:CN=alice,OU=eng,O=Acme,C=US".
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import BrokerConfig

# the names X.500 gives the attributes Python reports, as RFC 2253 (and Java's X500Principal) writes them
_SHORT = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O", "localityName": "L",
          "stateOrProvinceName": "ST", "countryName": "C", "streetAddress": "STREET", "domainComponent": "DC",
          "userId": "UID"}


def _password(cfg: BrokerConfig) -> str | None:
    return cfg.ssl_key_password or None


def server_context(cfg: BrokerConfig) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cfg.ssl_keystore_location, cfg.ssl_key_location or None, _password(cfg))
    if cfg.ssl_truststore_location:
        ctx.load_verify_locations(cfg.ssl_truststore_location)
    ctx.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                       "required": ssl.CERT_REQUIRED}[cfg.ssl_client_auth]
    return ctx


def client_context(cfg: BrokerConfig) -> ssl.SSLContext:
    """For this broker's connections to other brokers' TLS listeners: their certificates checked
    against the truststore (the system's CAs without one), and this broker's own certificate
    offered, for listeners that ask for one."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cfg.ssl_truststore_location:
        ctx.load_verify_locations(cfg.ssl_truststore_location)
    else:
        ctx.load_default_certs()
    ctx.check_hostname = cfg.ssl_endpoint_identification_algorithm == "https"
    if cfg.ssl_keystore_location:
        ctx.load_cert_chain(cfg.ssl_keystore_location, cfg.ssl_key_location or None, _password(cfg))
    return ctx


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;=' else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def subject_name(peercert: dict[str, Any]) -> str | None:
    """The subject of `SSLSocket.getpeercert()` as an RFC 2253 distinguished name (most specific
    attribute first, the reverse of the certificate's order); None without a subject."""
    rdns = peercert.get("subject") or ()
    parts = ["+".join(f"{_SHORT.get(k, k)}={_escape(v)}" for k, v in rdn) for rdn in reversed(rdns)]
    return ",".join(parts) or None


def principal_of(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str | None:
    """'User:<subject>' for a verified client certificate; None when there is none."""
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    if not cert:
        return None
    name = subject_name(cert)
    return f"User:{name}" if name else None
