"""DescribeCluster over the wire: every version, the endpoint-type errors, and agreement with Metadata."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers import BrokerProcess
from helpers.raw import Raw

from broker.apis.describe_cluster import CLUSTER_OPERATIONS
from protocol.errors import ErrorCode as E
from protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse

MIN_INT32 = -(2**31)
ENV = {"KETCH_CLUSTER_ID": "describe-me", "KETCH_NODE_ID": "7", "KETCH_RACK": "rack-a"}


@pytest.fixture(scope="module")
def racked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("describe-cluster") / "data", env=ENV)
    b.start()
    yield b
    died = b.died_unexpectedly()
    b.close()
    assert not died, b.log_tail()


@pytest.fixture
def raw(racked: BrokerProcess) -> Iterator[Raw]:
    r = Raw(racked.port)
    yield r
    r.close()


def describe(raw: Raw, version: int, **kw: object) -> DescribeClusterResponse:
    resp = raw.request(DescribeClusterRequest(**kw), version)  # type: ignore[arg-type]
    assert isinstance(resp, DescribeClusterResponse)
    return resp


@pytest.mark.parametrize("version", [0, 1, 2])
def test_cluster_id_controller_and_brokers(racked: BrokerProcess, raw: Raw, version: int) -> None:
    resp = describe(raw, version)
    assert (resp.error_code, resp.error_message) == (0, None)
    assert (resp.cluster_id, resp.controller_id, resp.endpoint_type) == ("describe-me", 7, 1)
    assert [(b.broker_id, b.host, b.port, b.rack, b.is_fenced) for b in resp.brokers] == [
        (7, racked.host, racked.port, "rack-a", False)]
    assert resp.cluster_authorized_operations == MIN_INT32  # not asked for
    asked = describe(raw, version, include_cluster_authorized_operations=True, include_fenced_brokers=True)
    # no authorizer: every operation the cluster resource has (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
    # DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE), as Kafka reports it without ACLs
    assert asked.cluster_authorized_operations == CLUSTER_OPERATIONS == 0b1_1111_1010_0000
    assert len(asked.brokers) == 1


def test_the_same_brokers_as_metadata(raw: Raw) -> None:
    md = raw.request(MetadataRequest(topics=[]), 12)
    assert isinstance(md, MetadataResponse)
    dc = describe(raw, 2)
    assert (dc.cluster_id, dc.controller_id) == (md.cluster_id, md.controller_id)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in dc.brokers] == [
        (b.node_id, b.host, b.port, b.rack) for b in md.brokers]


@pytest.mark.parametrize("version", [8, 9, 10])
def test_metadata_reports_the_same_cluster_operations(raw: Raw, version: int) -> None:
    """librdkafka's describe_cluster asks through Metadata v8-10, not DescribeCluster."""
    asked = raw.request(MetadataRequest(topics=[], include_cluster_authorized_operations=True), version)
    plain = raw.request(MetadataRequest(topics=[]), version)
    assert isinstance(asked, MetadataResponse) and isinstance(plain, MetadataResponse)
    assert (asked.cluster_authorized_operations, plain.cluster_authorized_operations) == (CLUSTER_OPERATIONS,
                                                                                         MIN_INT32)


@pytest.mark.parametrize("version", [8, 9, 10, 12])
def test_metadata_reports_topic_operations_when_asked(raw: Raw, version: int) -> None:
    """confluent_kafka describe_topics(include_authorized_operations=True) and Java's
    describeTopics ask for them; without ACLs every topic operation is allowed."""
    topic = MetadataRequestTopic(name="__ketch_ops_probe")
    asked = raw.request(MetadataRequest(topics=[topic], include_topic_authorized_operations=True), version)
    plain = raw.request(MetadataRequest(topics=[topic]), version)
    assert isinstance(asked, MetadataResponse) and isinstance(plain, MetadataResponse)
    assert asked.topics[0].error_code == 0
    # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS (AclOperation 3-8, 10, 11)
    assert (asked.topics[0].topic_authorized_operations, plain.topics[0].topic_authorized_operations) == (
        0b1101_1111_1000, MIN_INT32)


@pytest.mark.parametrize("version", [1, 2])
def test_endpoint_types_a_broker_does_not_serve(raw: Raw, version: int) -> None:
    controllers = describe(raw, version, endpoint_type=2)
    assert controllers.error_code == E.MISMATCHED_ENDPOINT_TYPE
    assert controllers.error_message == (
        "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER")
    assert controllers.brokers == [] and controllers.cluster_id == ""
    for bad in (0, 3, -1):
        unknown = describe(raw, version, endpoint_type=bad)
        assert unknown.error_code == E.UNSUPPORTED_ENDPOINT_TYPE
        assert unknown.error_message == f"Unsupported endpoint type {bad}"


def test_no_rack_is_null(broker: BrokerProcess) -> None:
    r = Raw(broker.port)
    try:
        resp = describe(r, 0)
    finally:
        r.close()
    assert [(b.broker_id, b.rack) for b in resp.brokers] == [(1, None)]
    assert (resp.cluster_id, resp.controller_id) == ("ketch-cluster", 1)
