"""Issue 27: the bundled client and `ketch user scram` against a secured broker process: SCRAM
users set, listed and deleted from the command line (also over SASL_SSL with --command-config),
the client producing and consuming over SSL (with a client certificate), SASL_PLAINTEXT (PLAIN,
SCRAM-SHA-256) and SASL_SSL (SCRAM-SHA-512), and refused with a wrong password, an unknown user
or a deleted credential."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.certs import Certs, make_certs
from helpers.secure import PLAIN_USERS, SecureBroker

from client import AuthenticationError, Consumer, Producer, Security


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path / "certs")


@pytest.fixture
def secure(tmp_path: Path, certs: Certs) -> Iterator[SecureBroker]:
    b = SecureBroker(tmp_path / "data", certs)
    b.start()
    try:
        yield b
    finally:
        b.close()


def ketch(bootstrap: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker", *args, "--bootstrap", bootstrap],
                          capture_output=True, text=True, timeout=60, input=stdin)


async def _round_trip(address: str, security: Security) -> bytes | None:
    topic = f"sec-own-{uuid.uuid4().hex[:8]}"
    async with Producer(address, security=security) as producer:
        await producer.send_and_wait(topic, b"v1")
    async with Consumer(address, auto_offset_reset="earliest", security=security) as consumer:
        from client import TopicPartition  # noqa: PLC0415

        consumer.assign([TopicPartition(topic, 0)])
        record = await consumer.getone(timeout_ms=30_000)  # waits for it, up to 30 s
        return record.value if record is not None else None


def test_users_from_the_cli_and_the_bundled_client(secure: SecureBroker, certs: Certs, tmp_path: Path) -> None:
    plain = secure.bootstrap
    r = ketch(plain, "user", "scram", "set", "alice", "--mechanism", "SCRAM-SHA-256", "--mechanism", "SCRAM-SHA-512",
              "--password-stdin", stdin="alice-secret\n")
    assert r.returncode == 0, r.stderr
    listed = json.loads(ketch(plain, "user", "scram", "list", "--json").stdout)
    assert listed == [{"user": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 4096},
                      {"user": "alice", "mechanism": "SCRAM-SHA-512", "iterations": 4096}]
    # the CLI itself over SASL_SSL, as Kafka's tools take a --command-config
    props = tmp_path / "client.properties"
    props.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=alice\n"
                     f"sasl.password=alice-secret\nssl.ca.location={certs.ca}\n")
    over_tls = ketch(secure.address("SASL_SSL"), "user", "scram", "list", "--command-config", str(props))
    assert over_tls.returncode == 0 and "SCRAM-SHA-512" in over_tls.stdout, over_tls.stderr

    import asyncio  # noqa: PLC0415

    cases = {
        "SSL": Security("SSL", ssl_cafile=str(certs.ca), ssl_certfile=str(certs.client_cert),
                        ssl_keyfile=str(certs.client_key)),
        "SASL_PLAINTEXT": Security("SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username="carol",
                                   sasl_password=PLAIN_USERS["carol"]),
        "SASL_SSL": Security("SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="alice",
                             sasl_password="alice-secret", ssl_cafile=str(certs.ca)),
    }
    for listener, security in cases.items():
        assert asyncio.run(_round_trip(secure.address(listener), security)) == b"v1", listener
    scram256 = Security("SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", sasl_username="alice",
                        sasl_password="alice-secret")
    assert asyncio.run(_round_trip(secure.address("SASL_PLAINTEXT"), scram256)) == b"v1"
    for wrong in (Security("SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", sasl_username="alice",
                           sasl_password="nope"),
                  Security("SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username="nobody", sasl_password="x")):
        with pytest.raises(AuthenticationError):
            asyncio.run(_round_trip(secure.address("SASL_PLAINTEXT"), wrong))
    assert ketch(plain, "user", "scram", "delete", "alice", "--mechanism", "SCRAM-SHA-256").returncode == 0
    with pytest.raises(AuthenticationError):
        asyncio.run(_round_trip(secure.address("SASL_PLAINTEXT"), scram256))
    missing = ketch(plain, "user", "scram", "delete", "alice", "--mechanism", "SCRAM-SHA-256")
    assert missing.returncode == 1 and "RESOURCE_NOT_FOUND" in missing.stderr
