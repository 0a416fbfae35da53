"""Secured brokers for the security tests (issue 27): each with a PLAINTEXT listener (the harness
waits on it, and admin steps use it) beside SSL, SASL_PLAINTEXT and SASL_SSL client listeners;
certificates made for the run (helpers/certs.py); PLAIN users in the config, SCRAM users created
through AlterUserScramCredentials."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from protocol.framing import encode_request
from protocol.messages.api_versions import ApiVersionsRequest

from .broker import HOST, BrokerProcess, free_port
from .certs import Certs
from .cluster import Cluster
from .cluster_metadata import voters_for

PLAIN_USERS = {"broker": "broker-secret", "carol": "carol-secret"}
PROTOCOLS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL")


def security_env(certs: Certs, listeners: str, **extra: str) -> dict[str, str]:
    return {
        "KETCH_LISTENERS": listeners,
        "KETCH_SSL_KEYSTORE_LOCATION": str(certs.broker_cert),
        "KETCH_SSL_KEY_LOCATION": str(certs.broker_key),
        "KETCH_SSL_TRUSTSTORE_LOCATION": str(certs.ca),
        "KETCH_SSL_CLIENT_AUTH": "requested",
        "KETCH_SASL_PLAIN_USERS": ",".join(f"{u}:{p}" for u, p in PLAIN_USERS.items()),
        "KETCH_CONNECTION_FAILED_AUTHENTICATION_DELAY_MS": "100",
        "KETCH_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        **extra,
    }


class SecureBroker(BrokerProcess):
    """A broker whose listeners come from `listeners` (KETCH_LISTENERS), not --listen: `port` is its
    PLAINTEXT one, `ports` has every client listener's."""

    def __init__(self, data_dir: Path | str, certs: Certs, *, env: Mapping[str, str] | None = None,
                 **kw: Any) -> None:
        self.ports = {"PLAINTEXT": kw.pop("port", None) or free_port(), **{p: free_port() for p in PROTOCOLS}}
        listeners = ",".join(f"{name}://{HOST}:{port}" for name, port in self.ports.items())
        super().__init__(data_dir, port=self.ports["PLAINTEXT"], env={**security_env(certs, listeners), **(env or {})},
                         **kw)

    def command(self) -> list[str]:
        cmd = super().command()
        i = cmd.index("--listen")
        del cmd[i:i + 4]  # --listen HOST:PORT --advertise HOST:PORT: `listeners` says it all
        return cmd

    def address(self, protocol: str) -> str:
        return f"{HOST}:{self.ports[protocol]}"


def secure_cluster(base: Path, certs: Certs, size: int = 3, *, env: Mapping[str, str] | None = None) -> Cluster:
    """`size` SecureBrokers in one quorum whose inter-broker listener (BROKER) is SASL_SSL and
    controller listener (CONTROLLER) SASL_PLAINTEXT: the brokers log in to each other as
    User:broker (PLAIN), the one super user."""
    voters = voters_for(size)
    secured = {"KETCH_LISTENER_SECURITY_PROTOCOL_MAP": "BROKER:SASL_SSL,CONTROLLER:SASL_PLAINTEXT",
               "KETCH_SUPER_USERS": "User:broker", "KETCH_SASL_INTER_BROKER_USERNAME": "broker",
               "KETCH_SASL_INTER_BROKER_PASSWORD": PLAIN_USERS["broker"], **(env or {})}
    c = Cluster(base, size, args_for=lambda c, n: ["--voters", voters])
    for node, old in list(c.brokers.items()):
        b = SecureBroker(old.data_dir, certs, port=c.ports[node], env={"KETCH_NODE_ID": str(node), **secured},
                         log_path=old.log_path)
        b.extra_args = old.extra_args
        c.brokers[node] = b
    return c


def api_versions_over_tls(address: str, certs: Certs, cert: Path | None, key: Path | None) -> bytes | None:
    """The start of the answer to an ApiVersions sent over TLS with that client certificate (or
    none), None when the broker refuses the handshake. With TLS 1.3 the broker refuses a
    certificate after the client's side of the handshake, so only a request tells."""
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert), str(key))
    host, port = address.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(encode_request(ApiVersionsRequest(), 0, 1, "probe"))
                return tls.recv(4) or None
        except (ssl.SSLError, ConnectionError):
            return None
