"""Issue 27: the principal of a client certificate, as Kafka's default principal builder names it
("User:" and the subject in RFC 2253 form), through a real TLS handshake with the broker's own
server context (broker/security/tls.py) — in memory, with certificates made for the run."""

from __future__ import annotations

import dataclasses
import ssl
from pathlib import Path

from helpers.certs import make_certs

from broker.config import BrokerConfig
from broker.security.tls import principal_of, server_context


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> ssl.SSLObject:
    """Drive both ends of a TLS handshake through memory BIOs; the server's end once done."""
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    srv = server.wrap_bio(s_in, s_out, server_side=True)
    cli = client.wrap_bio(c_in, c_out, server_hostname="localhost")
    done = {"s": False, "c": False}
    for _ in range(20):
        for name, end in (("c", cli), ("s", srv)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return srv
    raise AssertionError("handshake did not finish")


def test_client_certificate_subject_is_the_principal(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    cfg = BrokerConfig(ssl_keystore_location=str(certs.broker_cert), ssl_key_location=str(certs.broker_key),
                       ssl_truststore_location=str(certs.ca), ssl_client_auth="required")
    client = ssl.create_default_context(cafile=str(certs.ca))
    client.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    assert principal_of(_handshake(server_context(cfg), client)) == "User:CN=alice,OU=eng,O=Ketch"
    anonymous = ssl.create_default_context(cafile=str(certs.ca))
    requested = dataclasses.replace(cfg, ssl_client_auth="requested")
    assert principal_of(_handshake(server_context(requested), anonymous)) is None  # ANONYMOUS then
