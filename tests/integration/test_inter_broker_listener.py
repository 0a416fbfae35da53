"""Only brokers write transaction markers (issue 11, item 6): WriteTxnMarkers and the broker form
of AddPartitionsToTxn (v4+) are served on the inter-broker listener only; on the client listener
they get CLUSTER_AUTHORIZATION_FAILED and nothing is written. Each listener advertises itself."""

from __future__ import annotations

import uuid

from helpers import BrokerProcess, unique_topic
from helpers.raw import Raw
from helpers.txn import RawTxn, txn_batch

from protocol.errors import ErrorCode as E
from protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.get_replica_log_info import (
    GetReplicaLogInfoRequest,
    GetReplicaLogInfoResponse,
    TopicPartitions,
)
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)


def _abort_marker(topic: str, pid: int, epoch: int) -> WriteTxnMarkersRequest:
    return WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=False,
        topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[0])], coordinator_epoch=0)])


def _port(addr: str) -> int:
    return int(addr.rsplit(":", 1)[1])


def test_a_client_cannot_forge_a_marker_but_the_inter_broker_listener_can(broker: BrokerProcess) -> None:
    topic = unique_topic("forge")
    c = RawTxn(broker.port)
    c.create_topic(topic, 1)
    tid = unique_topic("victim")
    pid, epoch = c.init_ok(tid)
    c.add_partitions(tid, pid, epoch, {topic: [0]})
    assert c.produce(topic, 0, txn_batch(pid, epoch, 0, 2), tid)[0] == 0
    lso = c.latest(topic, 0, committed=True)

    resp = c.request(_abort_marker(topic, pid, epoch), 1)
    assert isinstance(resp, WriteTxnMarkersResponse)
    assert resp.markers[0].topics[0].partitions[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert c.latest(topic, 0, committed=True) == lso  # the transaction is still open: nothing written

    ib = Raw(_port(broker.inter_broker_bootstrap))
    try:
        resp = ib.request(_abort_marker(topic, pid, epoch), 1)
        assert isinstance(resp, WriteTxnMarkersResponse)
        assert resp.markers[0].topics[0].partitions[0].error_code == 0
    finally:
        ib.close()
    assert c.latest(topic, 0, committed=True) == c.latest(topic, 0, committed=False)
    c.close()


def test_the_broker_form_of_add_partitions_is_refused_to_clients(broker: BrokerProcess) -> None:
    req = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
        transactional_id="t", producer_id=1, producer_epoch=0, verify_only=True,
        topics=[AddPartitionsToTxnTopic(name="x", partitions=[0])])])
    c = Raw(broker.port)
    try:
        resp = c.request(req, 4)
        assert isinstance(resp, AddPartitionsToTxnResponse)
        assert resp.error_code == E.CLUSTER_AUTHORIZATION_FAILED and resp.results_by_transaction == []
    finally:
        c.close()
    ib = Raw(_port(broker.inter_broker_bootstrap))
    try:
        resp = ib.request(req, 4)
        assert isinstance(resp, AddPartitionsToTxnResponse) and resp.error_code == 0
        assert len(resp.results_by_transaction) == 1
    finally:
        ib.close()


def test_each_listener_advertises_its_own_address(broker: BrokerProcess) -> None:
    for port in (broker.port, _port(broker.inter_broker_bootstrap)):
        c = Raw(port)
        try:
            md = c.request(MetadataRequest(topics=[]), 9)
            fc = c.request(FindCoordinatorRequest(key="g", key_type=0), 3)
        finally:
            c.close()
        assert isinstance(md, MetadataResponse) and isinstance(fc, FindCoordinatorResponse)
        assert [(b.host, b.port) for b in md.brokers] == [("127.0.0.1", port)]
        assert (fc.host, fc.port) == ("127.0.0.1", port)


def test_replica_log_info_answers_brokers_only(broker: BrokerProcess) -> None:
    """GetReplicaLogInfo (93): how far a replica's log goes, for the controller's recovery elections
    (KIP-966) — on the inter-broker listener; a client gets CLUSTER_AUTHORIZATION_FAILED."""
    topic = unique_topic("loginfo")
    c = RawTxn(broker.port)
    c.create_topic(topic, 1)
    assert c.produce(topic, 0, txn_batch(-1, -1, -1, 3, transactional=False), None)[0] == 0
    meta = c.request(MetadataRequest(topics=None), 12)
    assert isinstance(meta, MetadataResponse)
    topic_id = next(t.topic_id for t in meta.topics if t.name == topic)
    unknown = uuid.UUID(int=7)
    req = GetReplicaLogInfoRequest(topic_partitions=[TopicPartitions(topic_id=topic_id, partitions=[0, 5]),
                                                     TopicPartitions(topic_id=unknown, partitions=[0])])
    resp = c.request(req, 0)
    c.close()
    assert isinstance(resp, GetReplicaLogInfoResponse)
    assert {p.error_code for t in resp.topic_partition_log_info_list for p in t.partition_log_info} == {
        E.CLUSTER_AUTHORIZATION_FAILED}
    ib = Raw(_port(broker.inter_broker_bootstrap))
    try:
        resp = ib.request(req, 0)
    finally:
        ib.close()
    assert isinstance(resp, GetReplicaLogInfoResponse) and resp.broker_epoch >= 0 and not resp.truncated
    ours, theirs = resp.topic_partition_log_info_list
    assert [(p.partition, p.error_code, p.log_end_offset, p.last_written_leader_epoch) for p in ours.partition_log_info] \
        == [(0, 0, 3, 0), (5, E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
    assert [(p.partition, p.error_code) for p in theirs.partition_log_info] == [(0, E.UNKNOWN_TOPIC_ID)]
