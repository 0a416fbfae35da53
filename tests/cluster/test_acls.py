"""Issue 27 (ACLs) on three real broker processes with the authorizer on. There is no
authentication on this branch: every connection is User:ANONYMOUS, so the cluster allows a
resource without ACLs to everyone (allow_everyone_if_no_acl_found) — the brokers' own traffic
needs no ACL — and each test puts ACLs on its resources to grant or refuse ANONYMOUS."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from helpers.cluster import Cluster
from helpers.cluster_metadata import listed_everywhere, new_topic, voters_for
from helpers.confluent import QUIET
from helpers.raw import Raw
from helpers.wait import wait_until

from protocol.acl import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    creation_of,
    delete_filter_of,
    describe_request_of,
    described,
)
from protocol.errors import ErrorCode
from protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from protocol.messages.describe_acls import DescribeAclsResponse
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse

ANONYMOUS, OTHER = "User:ANONYMOUS", "User:someone-else"
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
PROPAGATION_S = 10.0  # a metadata entry reaches every broker's image well within this


@pytest.fixture
def cluster(cluster_factory) -> Cluster:  # type: ignore[no-untyped-def]
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env={"KETCH_BROKER_SESSION_TIMEOUT_MS": "3000", "KETCH_AUTHORIZER": "true",
                                      "KETCH_ALLOW_EVERYONE_IF_NO_ACL_FOUND": "true"})
    listed_everywhere(c)
    return c


def acl(rtype: int, name: str, op: int, perm: int = ALLOW, principal: str = ANONYMOUS) -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, principal, "*", op, perm)


def _ask(port: int, req: CreateAclsRequest | DeleteAclsRequest) -> CreateAclsResponse | DeleteAclsResponse | None:
    """The answer, or None while it is NOT_CONTROLLER (a quorum election under way): retried, as
    every client retries it."""
    raw = Raw(port)
    try:
        resp = raw.request(req, 3)
    finally:
        raw.close()
    assert isinstance(resp, CreateAclsResponse | DeleteAclsResponse)
    results = resp.results if isinstance(resp, CreateAclsResponse) else resp.filter_results
    return None if any(r.error_code == ErrorCode.NOT_CONTROLLER for r in results) else resp


def create_acls(c: Cluster, node: int, *bindings: AclBinding) -> None:
    req = CreateAclsRequest(creations=[creation_of(b) for b in bindings])
    resp = wait_until(lambda: _ask(c.ports[node], req), timeout=30, message="CreateAcls answered")
    assert isinstance(resp, CreateAclsResponse) and [r.error_code for r in resp.results] == [0] * len(bindings), resp


def delete_acl(c: Cluster, node: int, b: AclBinding) -> None:
    req = DeleteAclsRequest(filters=[delete_filter_of(AclFilter(
        b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation, b.permission))])
    resp = wait_until(lambda: _ask(c.ports[node], req), timeout=30, message="DeleteAcls answered")
    assert isinstance(resp, DeleteAclsResponse) and len(resp.filter_results[0].matching_acls) == 1, resp


def listed(port: int) -> list[AclBinding]:
    """The ACLs broker `port`'s image has (DescribeAcls answers from it)."""
    raw = Raw(port)
    try:
        resp = raw.request(describe_request_of(AclFilter()), 3)
    finally:
        raw.close()
    assert isinstance(resp, DescribeAclsResponse) and resp.error_code == 0, resp
    return described(resp.resources)


def metadata_error(port: int, topic: str) -> int:
    raw = Raw(port)
    try:
        resp = raw.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False),
                           12)
    finally:
        raw.close()
    assert isinstance(resp, MetadataResponse)
    return resp.topics[0].error_code


def test_an_acl_created_through_one_broker_is_enforced_by_the_others(cluster: Cluster) -> None:
    c = cluster
    new_topic(c, "hidden", 1, 3)
    assert {metadata_error(c.ports[n], "hidden") for n in c.node_ids} == {0}
    create_acls(c, 1, acl(ResourceType.TOPIC, "hidden", AclOperation.DESCRIBE, DENY))
    started = time.monotonic()
    c.wait_until(lambda: all(metadata_error(c.ports[n], "hidden") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
                             for n in (2, 3)), timeout=PROPAGATION_S,
                 message="brokers 2 and 3 to refuse the topic the new ACL hides")
    assert time.monotonic() - started < PROPAGATION_S


def test_a_revoked_read_stops_a_running_consumer(cluster: Cluster) -> None:
    c = cluster
    new_topic(c, "orders", 1, 3)
    read = acl(ResourceType.TOPIC, "orders", AclOperation.READ)
    # an ACL for someone else too: once READ is revoked the topic still has ACLs, so nothing
    # falls back to allow_everyone_if_no_acl_found
    create_acls(c, 1, read, acl(ResourceType.TOPIC, "orders", AclOperation.WRITE),
                acl(ResourceType.TOPIC, "orders", AclOperation.ALL, principal=OTHER))
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", **QUIET})
    producer.produce("orders", b"first")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "orders-reader", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", **QUIET})
    try:
        consumer.assign([TopicPartition("orders", 0, 0)])
        got = None
        deadline = time.monotonic() + 30
        while got is None and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got = m.value()
        assert got == b"first"
        delete_acl(c, 2, read)
        c.wait_until(lambda: all(read not in listed(c.ports[n]) for n in c.node_ids), timeout=PROPAGATION_S,
                     message="every broker to have applied the revocation")
        producer.produce("orders", b"second")
        assert producer.flush(30) == 0
        refused = False
        deadline = time.monotonic() + 30
        while not refused and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            assert m.error() is not None, f"read {m.value()!r} after READ was revoked"
            refused = m.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert refused
    finally:
        consumer.close()


def test_a_transactional_producer_without_write_on_its_id_is_refused(cluster: Cluster) -> None:
    c = cluster
    create_acls(c, 3, acl(ResourceType.TRANSACTIONAL_ID, "payments", AclOperation.WRITE, principal=OTHER))
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "payments", **QUIET})
    with pytest.raises(KafkaException) as e:
        p.init_transactions(30)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
