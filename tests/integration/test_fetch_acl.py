"""READ revoked while a consumer's fetch is parked on the broker: the records that wake it are
refused, not served. Kafka authorizes a fetch once, when it arrives, and a delayed fetch answers
what it finds when it completes; this broker asks again at every read (apis/fetch.may_read), so a
revocation holds from the first read after it. Raw frames on one real broker, so that the fetch is
surely parked when the ACL goes (tests/cluster/test_acls.py has the same through confluent-kafka
on three brokers)."""

from __future__ import annotations

import threading

from helpers import BrokerProcess, wait_until
from helpers.acls import acl, create_acls, delete_acl, listed
from helpers.cluster_metadata import create as create_at
from helpers.raw import Raw, produce_values

from protocol.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic

ON = {"KETCH_AUTHORIZER": "true", "KETCH_ALLOW_EVERYONE_IF_NO_ACL_FOUND": "true"}
OTHER = "User:someone-else"


def produce(port: int, topic: str, value: bytes) -> None:
    conn = Raw(port)
    try:
        produce_values(conn, topic, [value])
    finally:
        conn.close()


def fetch_at(topic: str, offset: int, wait_ms: int) -> FetchRequest:
    return FetchRequest(max_wait_ms=wait_ms, min_bytes=1, max_bytes=1_000_000, isolation_level=1, topics=[
        FetchTopic(topic=topic, partitions=[
            FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1_000_000)])])


def test_a_fetch_parked_across_a_revoked_read_is_refused(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b: BrokerProcess = broker_factory(env=ON)
    assert create_at(b.port, "orders", 1, -1) == (0, None)
    read = acl(ResourceType.TOPIC, "orders", AclOperation.READ)
    # an ACL for someone else too: without READ the topic still has ACLs, so nothing falls back
    # to allow_everyone_if_no_acl_found
    create_acls(b.port, read, acl(ResourceType.TOPIC, "orders", AclOperation.WRITE),
                acl(ResourceType.TOPIC, "orders", AclOperation.ALL, principal=OTHER))
    produce(b.port, "orders", b"first")
    conn = Raw(b.port)
    answer: list[object] = []
    try:
        # at the end of the log: parked, for up to 30 s
        conn.send(fetch_at("orders", 1, 30_000), 11)
        waiter = threading.Thread(target=lambda: answer.append(conn.receive(FetchResponse, 11)[1]), daemon=True)
        waiter.start()
        delete_acl(b.port, read)
        wait_until(lambda: read not in listed(b.port), timeout=10, message="the revocation applied")
        assert not answer, f"the fetch was answered before anything was produced: {answer}"
        produce(b.port, "orders", b"second")
        waiter.join(40)
        assert answer, "the fetch was not answered"
    finally:
        conn.close()
    resp = answer[0]
    assert isinstance(resp, FetchResponse)
    pd = resp.responses[0].partitions[0]
    assert (pd.error_code, pd.records) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, b""), pd
