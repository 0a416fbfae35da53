"""Certificates for a test run, made with the openssl command line: a CA, a broker certificate
for localhost and 127.0.0.1, client certificates (CN=alice) signed by that CA, and a client
certificate from another CA (a "bad certificate"). Nothing here is committed: every run makes
its own keys in the test's temporary directory."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certs:
    ca: Path  # the CA certificate brokers and clients trust
    broker_cert: Path  # the broker's certificate chain (PEM)
    broker_key: Path
    client_cert: Path  # CN=alice,OU=eng,O=Ketch, signed by the CA
    client_key: Path
    rogue_cert: Path  # CN=mallory, signed by a CA nobody trusts
    rogue_key: Path


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(d: Path, name: str) -> None:
    _run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
         "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=d)


def _signed(d: Path, name: str, subject: str, ca: str, san: str | None = None) -> None:
    _run("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", f"{name}.key", "-out", f"{name}.csr",
         cwd=d)
    ext = d / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\n" if san else "basicConstraints=CA:FALSE\n")
    _run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
         "-days", "2", "-out", f"{name}.pem", "-extfile", ext.name, cwd=d)


def make_certs(d: Path) -> Certs:
    d.mkdir(parents=True, exist_ok=True)
    _ca(d, "ca")
    _ca(d, "rogue-ca")
    _signed(d, "broker", "/CN=localhost", "ca", "DNS:localhost,IP:127.0.0.1")
    _signed(d, "alice", "/O=Ketch/OU=eng/CN=alice", "ca")
    _signed(d, "mallory", "/CN=mallory", "rogue-ca")
    return Certs(d / "ca.pem", d / "broker.pem", d / "broker.key", d / "alice.pem", d / "alice.key",
                 d / "mallory.pem", d / "mallory.key")
