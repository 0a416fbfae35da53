"""Issue 27's acceptance on the 3-broker secured cluster with ACLs on: brokers logged in to each
other as User:broker over a SASL_SSL inter-broker listener, the authorizer on with
allow_everyone_if_no_acl_found false, client certificates required on every TLS listener, and
clients logging in with SCRAM-SHA-512 over SASL_SSL, each granted only what its test needs.

The harness's PLAINTEXT listener (topics made, ACLs set, output read back) is User:ANONYMOUS,
made a super user here: it stands for an administrator's trusted listener; no client under test
uses it.

- A transactional producer without WRITE on its transactional id is refused
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and does not fence the producer that has it.
- A consume-transform-produce copier (send_offsets_to_transaction) is exactly once.
- aiokafka and kafka-python produce and consume over SASL_SSL; a certificate from a CA the
  brokers do not trust, and none at all, are refused.
- confluent-kafka's AdminClient creates, describes and deletes ACLs, and what it creates is
  enforced."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from confluent_kafka.admin import AclOperation as CkOperation
from confluent_kafka.admin import AclPermissionType as CkPermission
from confluent_kafka.admin import ResourcePatternType as CkPattern
from confluent_kafka.admin import ResourceType as CkResource
from helpers.acls import acl, create_acls, listed
from helpers.certs import Certs, make_certs
from helpers.cluster import Cluster
from helpers.cluster_metadata import listed_everywhere, new_topic
from helpers.confluent import QUIET, consume_all
from helpers.secure import PLAIN_USERS, api_versions_over_tls, secure_cluster
from helpers.soak import TxnPipeline, parse_out, prefill
from helpers.wait import wait_until

from protocol.acl import AclBinding as Binding
from protocol.acl import AclOperation, PatternType, ResourceType

USERS = ("alice", "mallory", "bob", "copier", "dora")
PROPAGATION_S = 10.0


def password(user: str) -> str:
    return f"{user}-secret"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[Cluster]:
    c = secure_cluster(tmp_path_factory.mktemp("secure-acls"), certs, env={
        "KETCH_AUTHORIZER": "true", "KETCH_ALLOW_EVERYONE_IF_NO_ACL_FOUND": "false",
        "KETCH_SUPER_USERS": "User:broker;User:ANONYMOUS", "KETCH_SSL_CLIENT_AUTH": "required",
        "KETCH_BROKER_SESSION_TIMEOUT_MS": "6000"})
    try:
        c.start()
        listed_everywhere(c)  # registered and heartbeating over the secured listeners
        admin = AdminClient({"bootstrap.servers": c.bootstrap, **QUIET})
        for fut in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                u, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password(u).encode())
                for u in USERS]).values():
            fut.result(30)
        yield c
    finally:
        c.close()


def sasl_ssl(c: Cluster) -> str:
    return ",".join(c[n].address("SASL_SSL") for n in c.node_ids)  # type: ignore[attr-defined]


def login(c: Cluster, certs: Certs, user: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, Any]:
    """confluent-kafka's settings for `user` over SASL_SSL (with the client certificate every TLS
    listener of this cluster requires)."""
    return {"bootstrap.servers": sasl_ssl(c), "security.protocol": "sasl_ssl", "ssl.ca.location": str(certs.ca),
            "ssl.certificate.location": str(certs.client_cert), "ssl.key.location": str(certs.client_key),
            "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": PLAIN_USERS.get(user) or password(user), **QUIET}


def grant(c: Cluster, *bindings: Binding) -> None:
    """Create the ACLs and wait until every broker's image has them."""
    create_acls(c.ports[1], *bindings)
    c.wait_until(lambda: all(set(bindings) <= set(listed(c.ports[n])) for n in c.node_ids), timeout=PROPAGATION_S,
                 message="every broker to have the new ACLs")


def allow(user: str, rtype: int, name: str, *ops: int, prefixed: bool = False) -> list[Binding]:
    pattern = PatternType.PREFIXED if prefixed else PatternType.LITERAL
    return [acl(rtype, name, op, principal=f"User:{user}", pattern=pattern) for op in ops]


def _init(producer: Producer) -> bool:
    """init_transactions, False on a retriable error (a SCRAM credential not on every broker yet)."""
    try:
        producer.init_transactions(10)
    except KafkaException as e:
        if e.args[0].retriable():
            return False
        raise
    return True


def read_committed(c: Cluster, certs: Certs, user: str, topic: str, n: int) -> list[bytes]:
    consumer = Consumer({**login(c, certs, user), "group.id": topic, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    got: list[bytes] = []

    def poll() -> int:
        m = consumer.poll(0.5)
        if m is not None:
            assert m.error() is None or m.error().retriable(), m.error()
            if m.error() is None:
                got.append(m.value())
        return len(got)

    try:
        wait_until(lambda: poll() >= n, timeout=60, message=lambda: f"{n} committed records, got {len(got)}")
    finally:
        consumer.close()
    return got


# ---- a transactional id its principal may not WRITE -------------------------------------------------
def test_no_write_on_the_transactional_id_is_refused_and_cannot_fence_its_owner(cluster: Cluster,
                                                                                certs: Certs) -> None:
    c = cluster
    topic, tid = f"pay-{uuid.uuid4().hex[:8]}", f"payments-{uuid.uuid4().hex[:8]}"
    new_topic(c, topic, 1, 3)
    # mallory may write the topic and find the id's coordinator (DESCRIBE), not WRITE the id
    grant(c, *allow("alice", ResourceType.TOPIC, topic, AclOperation.WRITE),
          *allow("alice", ResourceType.TRANSACTIONAL_ID, tid, AclOperation.WRITE),
          *allow("mallory", ResourceType.TOPIC, topic, AclOperation.WRITE),
          *allow("mallory", ResourceType.TRANSACTIONAL_ID, tid, AclOperation.DESCRIBE),
          *allow("bob", ResourceType.TOPIC, topic, AclOperation.READ),
          *allow("bob", ResourceType.GROUP, topic, AclOperation.READ))
    alice = Producer({**login(c, certs, "alice"), "transactional.id": tid, "acks": "all"})
    wait_until(lambda: _init(alice), timeout=30, message="alice's InitProducerId")
    alice.begin_transaction()
    for i in range(5):
        alice.produce(topic, f"a{i}".encode())
    assert alice.flush(30) == 0  # alice's transaction is open on the partition

    mallory = Producer({**login(c, certs, "mallory"), "transactional.id": tid})
    with pytest.raises(KafkaException) as refused:
        mallory.init_transactions(30)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    for i in range(5, 10):
        alice.produce(topic, f"a{i}".encode())
    alice.commit_transaction(30)  # not fenced: mallory's attempt bumped no epoch
    assert sorted(read_committed(c, certs, "bob", topic, 10)) == sorted(f"a{i}".encode() for i in range(10))


# ---- a transactional copier ------------------------------------------------------------------------
def test_a_transactional_copier_over_sasl_ssl_with_acls_is_exactly_once(cluster: Cluster, certs: Certs) -> None:
    c = cluster
    parts, messages = 3, 300
    src, dst = f"copy-in-{uuid.uuid4().hex[:6]}", f"copy-out-{uuid.uuid4().hex[:6]}"
    for t in (src, dst):
        new_topic(c, t, parts, 3)
    # what a copier needs and no more: TxnPipeline's ids and groups start with "soak-"
    grant(c, *allow("copier", ResourceType.TOPIC, src, AclOperation.READ),
          *allow("copier", ResourceType.TOPIC, dst, AclOperation.WRITE),
          *allow("copier", ResourceType.TRANSACTIONAL_ID, "soak-", AclOperation.WRITE, prefixed=True),
          *allow("copier", ResourceType.GROUP, "soak-", AclOperation.READ, prefixed=True))
    ends = prefill(c.bootstrap, src, messages, parts)
    copier = TxnPipeline(sasl_ssl(c), src, dst, ends, seed=27, deadline=time.monotonic() + 180,
                         max_txns=2 * messages, max_batch=40, crash_ratio=0.05,
                         client_conf=login(c, certs, "copier"))
    copier.start()
    copier.join(200)
    assert not copier.is_alive() and copier.crashed is None, copier.summary()
    assert copier.done and copier.commits > 0 and copier.aborts > 0, copier.summary()
    assert not any("AUTHORIZATION" in e for e in copier.errors), copier.summary()
    print(copier.summary())

    out = consume_all(c.bootstrap, dst, parts, {"isolation.level": "read_committed"}, timeout=120,
                      check_watermarks=False)
    by_input: Counter[bytes] = Counter()
    txns: set[int] = set()
    for r in out:
        assert r.value is not None
        txn, body = parse_out(r.value)
        by_input[body] += 1
        txns.add(txn)
    assert by_input == Counter({b"in-%d" % i: 1 for i in range(messages)}), copier.summary()
    assert not txns & set(copier.aborted_txns), f"aborted records visible; {copier.summary()}"
    checker = Consumer({**login(c, certs, "copier"), "group.id": copier.group, "enable.auto.commit": False})
    try:
        committed = checker.committed([TopicPartition(src, p) for p in range(parts)], timeout=30)
    finally:
        checker.close()
    assert {tp.partition: tp.offset for tp in committed} == ends


# ---- aiokafka and kafka-python; bad certificates ----------------------------------------------------
def test_aiokafka_and_kafka_python_over_sasl_ssl(cluster: Cluster, certs: Certs) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: PLC0415
    from aiokafka.helpers import create_ssl_context  # noqa: PLC0415
    from kafka import KafkaConsumer, KafkaProducer  # noqa: PLC0415

    c = cluster
    grant(c, *allow("dora", ResourceType.TOPIC, "dora-", AclOperation.ALL, prefixed=True),
          *allow("dora", ResourceType.GROUP, "dora-", AclOperation.ALL, prefixed=True))
    login_kw: dict[str, Any] = {"bootstrap_servers": sasl_ssl(c).split(","), "security_protocol": "SASL_SSL",
                                "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "dora",
                                "sasl_plain_password": password("dora")}
    aio_topic, kp_topic = f"dora-aio-{uuid.uuid4().hex[:6]}", f"dora-kp-{uuid.uuid4().hex[:6]}"
    for t in (aio_topic, kp_topic):
        new_topic(c, t, 3, 3)

    async def aiokafka_round_trip() -> bytes:
        kw = {**login_kw, "ssl_context": create_ssl_context(cafile=str(certs.ca), certfile=str(certs.client_cert),
                                                             keyfile=str(certs.client_key))}
        producer = AIOKafkaProducer(**kw)
        await producer.start()
        try:
            await producer.send_and_wait(aio_topic, b"from-aiokafka")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(aio_topic, auto_offset_reset="earliest", group_id=aio_topic, **kw)
        await consumer.start()
        try:
            return bytes((await asyncio.wait_for(consumer.getone(), 30)).value)
        finally:
            await consumer.stop()

    # dora's SCRAM credential reaches every broker within the propagation time
    assert wait_until(lambda: _or_none(lambda: asyncio.run(aiokafka_round_trip())), timeout=60,
                      message="aiokafka's round trip over SASL_SSL") == b"from-aiokafka"

    kw = {**login_kw, "ssl_cafile": str(certs.ca), "ssl_certfile": str(certs.client_cert),
          "ssl_keyfile": str(certs.client_key)}
    producer = KafkaProducer(**kw)
    try:
        producer.send(kp_topic, b"from-kafka-python").get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(kp_topic, auto_offset_reset="earliest", group_id=kp_topic, consumer_timeout_ms=30000,
                             **kw)
    try:
        assert next(iter(consumer)).value == b"from-kafka-python"
    finally:
        consumer.close()


def _or_none(f: Any) -> Any:
    from aiokafka.errors import KafkaError as AioError  # noqa: PLC0415

    try:
        return f()
    except AioError:
        return None


def test_a_bad_client_certificate_is_refused_where_one_is_required(cluster: Cluster, certs: Certs) -> None:
    for n in cluster.node_ids:
        for listener in ("SSL", "SASL_SSL"):
            address = cluster[n].address(listener)  # type: ignore[attr-defined]
            assert api_versions_over_tls(address, certs, certs.rogue_cert, certs.rogue_key) is None, address
            assert api_versions_over_tls(address, certs, None, None) is None, address
            assert api_versions_over_tls(address, certs, certs.client_cert, certs.client_key), address
    rogue = AdminClient({**login(cluster, certs, "dora"), "ssl.certificate.location": str(certs.rogue_cert),
                         "ssl.key.location": str(certs.rogue_key)})
    with pytest.raises(KafkaException):
        rogue.list_topics(timeout=3)  # the same login with the CA's certificate gets through (above)


# ---- ACLs through confluent-kafka's AdminClient -----------------------------------------------------
def test_acls_made_with_confluent_admin_client_are_enforced(cluster: Cluster, certs: Certs) -> None:
    c = cluster
    topic = f"ck-acl-{uuid.uuid4().hex[:8]}"
    new_topic(c, topic, 1, 3)
    seed = Producer({"bootstrap.servers": c.bootstrap, **QUIET})
    seed.produce(topic, b"secret")
    assert seed.flush(30) == 0
    admin = AdminClient(login(c, certs, "broker", "PLAIN"))  # the super user, over SASL_SSL
    # bob may use his groups: the topic is what is refused, then allowed
    grant(c, *allow("bob", ResourceType.GROUP, topic, AclOperation.READ, prefixed=True))

    def bob_reads() -> bytes | int:
        """The record, or the error bob's fetch gets."""
        consumer = Consumer({**login(c, certs, "bob"), "group.id": f"{topic}-{uuid.uuid4().hex[:6]}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is None:
                    continue
                if m.error() is None:
                    return bytes(m.value())
                if not m.error().retriable():
                    return int(m.error().code())
            raise AssertionError("bob got neither the record nor an error")
        finally:
            consumer.close()

    assert wait_until(lambda: _or_retry(bob_reads), timeout=30,
                      message="bob refused") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    binding = AclBinding(CkResource.TOPIC, topic, CkPattern.LITERAL, "User:bob", "*", CkOperation.READ,
                         CkPermission.ALLOW)
    for fut in admin.create_acls([binding]).values():
        assert fut.result(30) is None
    match = AclBindingFilter(CkResource.TOPIC, topic, CkPattern.MATCH, None, None, CkOperation.ANY, CkPermission.ANY)
    assert admin.describe_acls(match).result(30) == [binding]
    mine = allow("bob", ResourceType.TOPIC, topic, AclOperation.READ)
    c.wait_until(lambda: all(set(mine) <= set(listed(c.ports[n])) for n in c.node_ids), timeout=PROPAGATION_S,
                 message="every broker to have bob's READ")
    assert bob_reads() == b"secret"

    deleted = admin.delete_acls([AclBindingFilter(CkResource.TOPIC, topic, CkPattern.LITERAL, "User:bob", None,
                                                  CkOperation.ANY, CkPermission.ANY)])
    assert [r.result(30) for r in deleted.values()] == [[binding]]
    assert admin.describe_acls(match).result(30) == []
    c.wait_until(lambda: not any(set(mine) & set(listed(c.ports[n])) for n in c.node_ids), timeout=PROPAGATION_S,
                 message="every broker to have dropped bob's READ")
    assert bob_reads() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def _or_retry(f: Any) -> Any:
    """f(), or None if the login failed (bob's SCRAM credential not on that broker yet)."""
    try:
        got = f()
    except KafkaException:
        return None
    return None if got in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED) else got
