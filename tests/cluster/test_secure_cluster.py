"""Issue 27: three brokers whose inter-broker listener is SASL_SSL and controller listener
SASL_PLAINTEXT, the brokers logged in to each other as User:broker (the one super user). Over a
SASL_SSL client listener with SCRAM-SHA-512, a transaction commits across partitions replicated on
all three (markers, replica fetches, registration, heartbeats and the quorum all secured) and a
read_committed consumer reads it; a wrong password and an unknown user are refused; and a client
that logs in on the brokers' own listeners with a valid non-broker login cannot send what only
brokers send (WriteTxnMarkers, BrokerHeartbeat, Vote): CLUSTER_AUTHORIZATION_FAILED."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
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
from helpers.cluster_metadata import listed_everywhere, new_topic
from helpers.secure import PLAIN_USERS, secure_cluster
from helpers.wait import wait_until

from broker.config import BrokerConfig
from broker.security.tls import client_context
from broker.wire import BrokerConnection, WireSecurity
from protocol.errors import ErrorCode
from protocol.messages.broker_heartbeat import BrokerHeartbeatRequest
from protocol.messages.vote import VoteRequest
from protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path / "certs")


@pytest.fixture
def cluster(tmp_path: Path, certs: Certs) -> Iterator[Cluster]:
    c = secure_cluster(tmp_path / "cluster", certs)
    try:
        c.start()
        listed_everywhere(c)  # registered and heartbeating over the secured controller listener
        yield c
    finally:
        c.close()


def _client(c: Cluster, certs: Certs, user: str, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": ",".join(c[n].address("SASL_SSL") for n in c.node_ids),  # type: ignore[attr-defined]
            "security.protocol": "sasl_ssl", "ssl.ca.location": str(certs.ca), "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": password}


def test_transaction_over_sasl_ssl_with_secured_brokers(cluster: Cluster, certs: Certs, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": cluster[1].bootstrap})
    for fut in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret")]).values():
        fut.result(30)
    topic = f"sec-txn-{uuid.uuid4().hex[:8]}"
    new_topic(cluster, topic, 3, 3)
    conf = _client(cluster, certs, "alice", "alice-secret")
    # every broker has the credential once its image has the record
    producer = Producer({**conf, "transactional.id": topic, "acks": "all"})
    wait_until(lambda: _init(producer), timeout=30, message="InitProducerId over SASL_SSL")
    producer.begin_transaction()
    for i in range(30):
        producer.produce(topic, f"v{i}".encode(), key=str(i).encode())
    producer.commit_transaction(30)
    consumer = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        wait_until(lambda: _poll_into(consumer, got) >= 30, timeout=60, message=lambda: f"30 committed, got {len(got)}")
    finally:
        consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(30))
    _refused(_client(cluster, certs, "alice", "wrong"))
    _refused(_client(cluster, certs, "nobody", "x"))


def _refused(conf: dict[str, Any]) -> None:
    errors: list[Any] = []
    refused = AdminClient({**conf, "error_cb": errors.append})
    with pytest.raises(KafkaException):
        refused.list_topics(timeout=3)
    assert wait_until(lambda: refused.poll(0.2) is not None and any("uthentication" in str(e) for e in errors),
                      timeout=10, message=lambda: f"an authentication failure, got {errors}")


def _init(producer: Producer) -> bool:
    try:
        producer.init_transactions(10)
    except KafkaException as e:
        if e.args[0].retriable():
            return False
        raise
    return True


def _poll_into(consumer: Consumer, got: list[bytes]) -> int:
    m = consumer.poll(0.5)
    if m is not None and m.error() is None:
        got.append(m.value())
    return len(got)


def test_a_client_login_on_the_brokers_listeners_cannot_act_as_a_broker(cluster: Cluster, certs: Certs) -> None:
    cfg = BrokerConfig(ssl_truststore_location=str(certs.ca))
    carol = PLAIN_USERS["carol"]

    async def run() -> None:
        ib_host, ib_port = cluster[1].inter_broker_bootstrap.split(":")
        conn = await BrokerConnection.connect(ib_host, int(ib_port), client_id="carol", security=WireSecurity(
            client_context(cfg), "PLAIN", "carol", carol))
        markers = await conn.request(WriteTxnMarkersRequest(markers=[WritableTxnMarker(
            producer_id=1, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
            topics=[WritableTxnMarkerTopic(name="x", partition_indexes=[0])])]))
        assert markers.markers[0].topics[0].partitions[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        conn.close()
        host, port = cluster[1].extra_args[1].split(",")[0].split("@")[1].split(":")
        ctl = await BrokerConnection.connect(host, int(port), client_id="carol",
                                             security=WireSecurity(None, "PLAIN", "carol", carol))
        hb = await ctl.request(BrokerHeartbeatRequest(broker_id=2, broker_epoch=1, want_fence=True))
        assert hb.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        vote = await ctl.request(VoteRequest())
        assert vote.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        ctl.close()

    asyncio.run(run())
    listed_everywhere(cluster)  # nobody was fenced by the forged heartbeat
