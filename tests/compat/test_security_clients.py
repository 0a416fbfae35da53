"""Issue 27: confluent-kafka, aiokafka and kafka-python connect to one broker, and to three in one
quorum whose brokers log in to each other (SASL_SSL between brokers), over SSL, SASL_PLAINTEXT
(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and SASL_SSL, produce and consume; a wrong password, an
unknown user and a certificate from an untrusted CA are refused. SCRAM users are
created with confluent-kafka's AdminClient (AlterUserScramCredentials, forwarded to the
controller), and listed back (DescribeUserScramCredentials)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from helpers.certs import Certs, make_certs
from helpers.cluster import Cluster
from helpers.cluster_metadata import listed_everywhere
from helpers.secure import PLAIN_USERS, SecureBroker, api_versions_over_tls, secure_cluster
from helpers.wait import wait_until

pytestmark = pytest.mark.compat

SCRAM_USERS = {"alice": "alice-secret"}
# (listener, mechanism, user, password)
CASES = [
    ("SSL", None, None, None),
    ("SASL_PLAINTEXT", "PLAIN", "carol", PLAIN_USERS["carol"]),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", SCRAM_USERS["alice"]),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", SCRAM_USERS["alice"]),
    ("SASL_SSL", "SCRAM-SHA-512", "alice", SCRAM_USERS["alice"]),
]
IDS = ["ssl", "plain", "scram256", "scram512", "sasl_ssl"]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


class ThreeBrokers:
    """A secured three-broker cluster seen as SecureBroker is: each listener's address is the
    three brokers' (clients bootstrap from all of them and are sent on by Metadata)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap

    def address(self, protocol: str) -> str:
        c = self.cluster
        return ",".join(c[n].address(protocol) for n in c.node_ids)  # type: ignore[attr-defined]


@pytest.fixture(scope="module", params=["one-broker", "three-brokers"])
def secure(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           certs: Certs) -> Iterator[SecureBroker | ThreeBrokers]:
    target: SecureBroker | ThreeBrokers
    if request.param == "one-broker":
        b = SecureBroker(tmp_path_factory.mktemp("secure") / "data", certs)
        b.start()
        target, close = b, b.close
    else:
        c = secure_cluster(tmp_path_factory.mktemp("secure3") / "cluster", certs)
        try:
            c.start()
            listed_everywhere(c)
        except BaseException:
            c.close()
            raise
        target, close = ThreeBrokers(c), c.close
    try:
        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        upserts = [UserScramCredentialUpsertion(u, ScramCredentialInfo(m, 4096), pw.encode())
                   for u, pw in SCRAM_USERS.items() for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)]
        for fut in admin.alter_user_scram_credentials(upserts).values():
            fut.result(30)
        described = admin.describe_user_scram_credentials(["alice"])["alice"].result(30)
        assert sorted(i.mechanism for i in described.scram_credential_infos) == [
            ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512]
        yield target
    finally:
        close()


def _confluent_conf(b: SecureBroker | ThreeBrokers, certs: Certs, listener: str, mech: str | None, user: str | None,
                    password: str | None) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": b.address(listener), "security.protocol": listener.lower()}
    if "SSL" in listener:
        conf |= {"ssl.ca.location": str(certs.ca), "ssl.certificate.location": str(certs.client_cert),
                 "ssl.key.location": str(certs.client_key)}
    if mech:
        conf |= {"sasl.mechanism": mech, "sasl.username": user, "sasl.password": password}
    return conf


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_confluent(secure: SecureBroker | ThreeBrokers, certs: Certs, case: tuple[str, str | None, str | None, str | None]) -> None:
    conf = _confluent_conf(secure, certs, *case)
    topic = f"sec-cf-{uuid.uuid4().hex[:8]}"
    p = Producer({**conf, "enable.idempotence": True})
    p.produce(topic, b"v1", key=b"k")
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    try:
        got = wait_until(lambda: (m := c.poll(0.5)) is not None and m.error() is None and m.value(), timeout=30,
                         message="the message back")
        assert got == b"v1"
    finally:
        c.close()


@pytest.mark.parametrize("case", [
    ("SASL_PLAINTEXT", "PLAIN", "carol", "wrong"),
    ("SASL_PLAINTEXT", "PLAIN", "nobody", "x"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "wrong"),
    ("SASL_SSL", "SCRAM-SHA-512", "nobody", "x"),
], ids=["plain-wrong-password", "plain-unknown-user", "scram-wrong-password", "scram-unknown-user"])
def test_confluent_refused(secure: SecureBroker | ThreeBrokers, certs: Certs, case: tuple[str, str, str, str]) -> None:
    errors: list[Any] = []
    conf = {**_confluent_conf(secure, certs, *case), "error_cb": errors.append}
    admin = AdminClient(conf)
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    # librdkafka reports it through error_cb, served by poll
    assert wait_until(lambda: admin.poll(0.2) is not None and any("uthentication" in str(e) for e in errors),
                      timeout=10, message=lambda: f"an authentication error, got {errors}")


def test_untrusted_client_certificate_refused(secure: SecureBroker | ThreeBrokers, certs: Certs) -> None:
    errors: list[Any] = []
    conf = {"bootstrap.servers": secure.address("SSL"), "security.protocol": "ssl", "ssl.ca.location": str(certs.ca),
            "ssl.certificate.location": str(certs.rogue_cert), "ssl.key.location": str(certs.rogue_key),
            "error_cb": errors.append}
    admin = AdminClient(conf)
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)  # the same client with alice's certificate gets through (test_confluent[ssl])
    # with TLS 1.3 the broker refuses the certificate after the client's side of the handshake:
    # librdkafka only sees the connection closed. A request sent with that certificate gets no
    # answer, one sent with alice's does:
    for address in secure.address("SSL").split(","):  # every broker's SSL listener
        assert api_versions_over_tls(address, certs, certs.rogue_cert, certs.rogue_key) is None, address
        assert api_versions_over_tls(address, certs, certs.client_cert, certs.client_key), address


# ---- aiokafka --------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_aiokafka(secure: SecureBroker | ThreeBrokers, certs: Certs, case: tuple[str, str | None, str | None, str | None]) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: PLC0415
    from aiokafka.helpers import create_ssl_context  # noqa: PLC0415

    listener, mech, user, password = case
    kw: dict[str, Any] = {"bootstrap_servers": secure.address(listener), "security_protocol": listener}
    if "SSL" in listener:
        kw["ssl_context"] = create_ssl_context(cafile=str(certs.ca), certfile=str(certs.client_cert),
                                               keyfile=str(certs.client_key))
    if mech:
        kw |= {"sasl_mechanism": mech, "sasl_plain_username": user, "sasl_plain_password": password}
    topic = f"sec-aio-{uuid.uuid4().hex[:8]}"

    async def run() -> bytes | None:
        producer = AIOKafkaProducer(**kw)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"v1")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", group_id=topic, **kw)
        await consumer.start()
        try:
            msg = await asyncio.wait_for(consumer.getone(), 30)
            return msg.value
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == b"v1"


def test_aiokafka_wrong_password_refused(secure: SecureBroker | ThreeBrokers) -> None:
    from aiokafka import AIOKafkaProducer  # noqa: PLC0415
    from aiokafka.errors import KafkaError  # noqa: PLC0415

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=secure.address("SASL_PLAINTEXT"),
                                    security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                                    sasl_plain_username="alice", sasl_plain_password="wrong",
                                    request_timeout_ms=5000)
        try:
            await producer.start()
        finally:
            await producer.stop()

    started = time.monotonic()
    with pytest.raises(KafkaError):
        asyncio.run(run())
    assert time.monotonic() - started < 20


# ---- kafka-python ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_kafka_python(secure: SecureBroker | ThreeBrokers, certs: Certs,
                      case: tuple[str, str | None, str | None, str | None]) -> None:
    from kafka import KafkaConsumer, KafkaProducer  # noqa: PLC0415

    listener, mech, user, password = case
    kw: dict[str, Any] = {"bootstrap_servers": secure.address(listener), "security_protocol": listener}
    if "SSL" in listener:
        kw |= {"ssl_cafile": str(certs.ca), "ssl_certfile": str(certs.client_cert), "ssl_keyfile": str(certs.client_key)}
    if mech:
        kw |= {"sasl_mechanism": mech, "sasl_plain_username": user, "sasl_plain_password": password}
    topic = f"sec-kp-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**kw)
    try:
        producer.send(topic, b"v1").get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", group_id=topic, consumer_timeout_ms=30000, **kw)
    try:
        assert next(iter(consumer)).value == b"v1"
    finally:
        consumer.close()


def test_kafka_python_unknown_user_refused(secure: SecureBroker | ThreeBrokers) -> None:
    from kafka import KafkaProducer  # noqa: PLC0415
    from kafka.errors import KafkaError  # noqa: PLC0415

    with pytest.raises(KafkaError):
        KafkaProducer(bootstrap_servers=secure.address("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="PLAIN", sasl_plain_username="nobody", sasl_plain_password="x",
                      bootstrap_timeout_ms=3000, max_block_ms=3000)


