"""Issue 27 (ACLs): every API x {allowed, denied}. One broker in process with the authorizer on
and no ACLs but the ones each row grants: a principal holding exactly the ACLs the row names is
not refused, one holding none gets the row's error. Handlers are called as the connection layer
calls them, with the ClientInfo authentication will fill (its principal)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from broker.apis import HANDLERS
from broker.config import BrokerConfig
from broker.context import ClientInfo
from broker.server import BrokerServer
from protocol.acl import CLUSTER_NAME, AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages import add_offsets_to_txn as aot
from protocol.messages import add_partitions_to_txn as apt
from protocol.messages import alter_configs as ac
from protocol.messages import alter_replica_log_dirs as arld
from protocol.messages import consumer_group_describe as cgd
from protocol.messages import consumer_group_heartbeat as cgh
from protocol.messages import create_acls as ca
from protocol.messages import create_partitions as cp
from protocol.messages import create_topics as ct
from protocol.messages import delete_acls as da
from protocol.messages import delete_groups as dg
from protocol.messages import delete_records as dr
from protocol.messages import delete_topics as dt
from protocol.messages import describe_acls as dacl
from protocol.messages import describe_configs as dc
from protocol.messages import describe_groups as dgr
from protocol.messages import describe_log_dirs as dld
from protocol.messages import describe_producers as dp
from protocol.messages import describe_quorum as dq
from protocol.messages import describe_topic_partitions as dtp
from protocol.messages import describe_transactions as dtx
from protocol.messages import elect_leaders as el
from protocol.messages import end_txn as et
from protocol.messages import fetch as fe
from protocol.messages import find_coordinator as fc
from protocol.messages import get_replica_log_info as grl
from protocol.messages import heartbeat as hb
from protocol.messages import incremental_alter_configs as iac
from protocol.messages import init_producer_id as ipi
from protocol.messages import join_group as jg
from protocol.messages import leave_group as lg
from protocol.messages import list_groups as lgr
from protocol.messages import list_offsets as lo
from protocol.messages import list_transactions as ltx
from protocol.messages import metadata as md
from protocol.messages import offset_commit as oc
from protocol.messages import offset_delete as od
from protocol.messages import offset_fetch as of
from protocol.messages import offset_for_leader_epoch as ofle
from protocol.messages import partition_reassignments as pr
from protocol.messages import produce as pd
from protocol.messages import share_fetch as sf
from protocol.messages import share_group_describe as sgd
from protocol.messages import share_group_heartbeat as sgh
from protocol.messages import share_group_state as sgs
from protocol.messages import sync_group as sg
from protocol.messages import txn_offset_commit as toc
from protocol.messages import user_scram_credentials as usc
from protocol.messages import write_txn_markers as wtm
from protocol.records import Record, build_batch

pytestmark = pytest.mark.asyncio(loop_scope="module")

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
Op = AclOperation
TOPIC, GROUP, TXN, MARKED = "t", "g", "x", "marked"
AUTH_ERRORS = {ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
               ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
ADMIN = "User:admin"
_ids = itertools.count(1)


def _client(principal: str, inter_broker: bool = False) -> ClientInfo:
    return ClientInfo(next(_ids), "10.1.2.3:40000", ("127.0.0.1", 9092), inter_broker, principal=principal)


async def call(server: BrokerServer, key: int, version: int, req: Any, principal: str, inter_broker: bool = False) -> Any:
    return await HANDLERS[key](server.ctx, _client(principal, inter_broker), RequestHeader(key, version, 1, "test"), req)


def codes(msg: Any) -> set[int]:
    """Every error code anywhere in a response."""
    out: set[int] = set()
    if dataclasses.is_dataclass(msg):
        for f in dataclasses.fields(msg):
            v = getattr(msg, f.name)
            if f.name.endswith("error_code") and isinstance(v, int):
                out.add(v)
            else:
                out |= codes(v)
    elif isinstance(msg, list):
        for x in msg:
            out |= codes(x)
    return out


def batch(transactional: bool = False) -> bytes:
    return build_batch([Record(0, 0, b"k", b"v", [])], producer_id=5000 if transactional else -1,
                       producer_epoch=0 if transactional else -1, base_sequence=0 if transactional else -1,
                       transactional=transactional)


@dataclasses.dataclass
class Row:
    name: str
    key: int
    version: int
    request: Callable[[], Any]
    needs: list[tuple[int, str, int]]  # (resource type, name, operation) granted to the allowed principal
    denied: ErrorCode
    inter_broker: bool = False


def _produce(tid: str | None = None) -> pd.ProduceRequest:
    return pd.ProduceRequest(transactional_id=tid, acks=1, timeout_ms=5000, topic_data=[pd.TopicProduceData(
        name=TOPIC, partition_data=[pd.PartitionProduceData(index=0, records=batch(tid is not None))])])


ROWS = [
    Row("Produce", 0, 9, _produce, [(T, TOPIC, Op.WRITE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    Row("Produce transactional", 0, 9, lambda: _produce(TXN), [(T, TOPIC, Op.WRITE), (X, TXN, Op.WRITE)],
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    Row("Fetch", 1, 12, lambda: fe.FetchRequest(max_wait_ms=0, min_bytes=1, topics=[fe.FetchTopic(
        topic=TOPIC, partitions=[fe.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 16)])]),
        [(T, TOPIC, Op.READ)], ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    Row("ListOffsets", 2, 7, lambda: lo.ListOffsetsRequest(replica_id=-1, topics=[lo.ListOffsetsTopic(
        name=TOPIC, partitions=[lo.ListOffsetsPartition(partition_index=0, timestamp=-1)])]),
        [(T, TOPIC, Op.DESCRIBE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    Row("Metadata", 3, 12, lambda: md.MetadataRequest(topics=[md.MetadataRequestTopic(name=TOPIC)],
                                                       allow_auto_topic_creation=False),
        [(T, TOPIC, Op.DESCRIBE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    Row("OffsetCommit", 8, 8, lambda: oc.OffsetCommitRequest(group_id=GROUP, member_id="", topics=[
        oc.OffsetCommitRequestTopic(name=TOPIC, partitions=[oc.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=0, committed_metadata="")])]),
        [(G, GROUP, Op.READ), (T, TOPIC, Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    Row("OffsetFetch", 9, 8, lambda: of.OffsetFetchRequest(groups=[of.OffsetFetchRequestGroup(group_id=GROUP, topics=[
        of.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0])])]),
        [(G, GROUP, Op.DESCRIBE), (T, TOPIC, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    Row("FindCoordinator group", 10, 4, lambda: fc.FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]),
        [(G, GROUP, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    Row("FindCoordinator transaction", 10, 4, lambda: fc.FindCoordinatorRequest(key_type=1, coordinator_keys=[TXN]),
        [(X, TXN, Op.DESCRIBE)], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    Row("FindCoordinator share", 10, 6, lambda: fc.FindCoordinatorRequest(
        key_type=2, coordinator_keys=[f"kip932-group:{__import__('uuid').UUID(int=7)}:0"]),
        [(C, CLUSTER_NAME, Op.CLUSTER_ACTION)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED, inter_broker=True),
    Row("JoinGroup", 11, 5, lambda: jg.JoinGroupRequest(
        group_id=GROUP, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="", protocol_type="consumer",
        protocols=[jg.JoinGroupRequestProtocol(name="range", metadata=b"")]),
        [(G, GROUP, Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    Row("Heartbeat", 12, 4, lambda: hb.HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="m"),
        [(G, GROUP, Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    Row("LeaveGroup", 13, 4, lambda: lg.LeaveGroupRequest(group_id=GROUP, members=[lg.MemberIdentity(member_id="m")]),
        [(G, GROUP, Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    Row("SyncGroup", 14, 5, lambda: sg.SyncGroupRequest(group_id=GROUP, generation_id=1, member_id="m", assignments=[]),
        [(G, GROUP, Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    Row("DescribeGroups", 15, 5, lambda: dgr.DescribeGroupsRequest(groups=[GROUP]),
        [(G, GROUP, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    Row("CreateTopics", 19, 7, lambda: ct.CreateTopicsRequest(validate_only=True, topics=[ct.CreatableTopic(
        name="new", num_partitions=1, replication_factor=1)]),
        [(C, CLUSTER_NAME, Op.CREATE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    Row("DeleteTopics", 20, 6, lambda: dt.DeleteTopicsRequest(topics=[dt.DeleteTopicState(name="absent")],
                                                             timeout_ms=1000),
        [(T, "absent", Op.DELETE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    Row("DeleteRecords", 21, 2, lambda: dr.DeleteRecordsRequest(timeout_ms=1000, topics=[dr.DeleteRecordsTopic(
        name=TOPIC, partitions=[dr.DeleteRecordsPartition(partition_index=0, offset=0)])]),
        [(T, TOPIC, Op.DELETE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    Row("InitProducerId transactional", 22, 4, lambda: ipi.InitProducerIdRequest(transactional_id=TXN,
                                                                                 transaction_timeout_ms=60000),
        [(X, TXN, Op.WRITE)], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    Row("InitProducerId two-phase commit", 22, 6, lambda: ipi.InitProducerIdRequest(
        transactional_id="tx-2pc", transaction_timeout_ms=60000, enable_2pc=True),
        [(X, "tx-2pc", Op.WRITE), (X, "tx-2pc", Op.TWO_PHASE_COMMIT)], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    Row("InitProducerId idempotent", 22, 4, lambda: ipi.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
        [(C, CLUSTER_NAME, Op.IDEMPOTENT_WRITE)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    Row("InitProducerId idempotent, WRITE on a topic", 22, 4,
        lambda: ipi.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
        [(T, "any-topic", Op.WRITE)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    Row("OffsetForLeaderEpoch", 23, 4, lambda: ofle.OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        ofle.OffsetForLeaderTopic(topic=TOPIC, partitions=[ofle.OffsetForLeaderPartition(partition=0, leader_epoch=0)])]),
        [(T, TOPIC, Op.DESCRIBE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    Row("AddPartitionsToTxn", 24, 3, lambda: apt.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TXN, v3_and_below_producer_id=5000, v3_and_below_producer_epoch=0,
        v3_and_below_topics=[apt.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])]),
        [(X, TXN, Op.WRITE), (T, TOPIC, Op.WRITE)], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    Row("AddOffsetsToTxn", 25, 3, lambda: aot.AddOffsetsToTxnRequest(transactional_id=TXN, producer_id=5000,
                                                                     producer_epoch=0, group_id=GROUP),
        [(X, TXN, Op.WRITE), (G, GROUP, Op.READ)], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    Row("EndTxn", 26, 3, lambda: et.EndTxnRequest(transactional_id=TXN, producer_id=5000, producer_epoch=0,
                                                 committed=False),
        [(X, TXN, Op.WRITE)], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    Row("WriteTxnMarkers", 27, 1, lambda: wtm.WriteTxnMarkersRequest(markers=[wtm.WritableTxnMarker(
        producer_id=6000, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[wtm.WritableTxnMarkerTopic(name=MARKED, partition_indexes=[0])])]),
        [(C, CLUSTER_NAME, Op.CLUSTER_ACTION)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED, inter_broker=True),
    Row("TxnOffsetCommit", 28, 3, lambda: toc.TxnOffsetCommitRequest(
        transactional_id=TXN, group_id=GROUP, producer_id=5000, producer_epoch=0, topics=[
            toc.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[toc.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=0, committed_metadata="")])]),
        [(X, TXN, Op.WRITE), (G, GROUP, Op.READ), (T, TOPIC, Op.READ)], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    Row("DescribeAcls", 29, 3, lambda: dacl.DescribeAclsRequest(
        resource_type_filter=ResourceType.ANY, pattern_type_filter=PatternType.ANY, operation=Op.ANY,
        permission_type=AclPermissionType.ANY), [(C, CLUSTER_NAME, Op.DESCRIBE)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    Row("CreateAcls", 30, 3, lambda: ca.CreateAclsRequest(creations=[ca.AclCreation(
        resource_type=T, resource_name="other", resource_pattern_type=PatternType.LITERAL, principal="User:zed",
        host="*", operation=Op.READ, permission_type=AclPermissionType.ALLOW)]),
        [(C, CLUSTER_NAME, Op.ALTER)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    Row("DeleteAcls", 31, 3, lambda: da.DeleteAclsRequest(filters=[da.DeleteAclsFilter(
        resource_type_filter=T, resource_name_filter="nothing-here", pattern_type_filter=PatternType.ANY,
        operation=Op.ANY, permission_type=AclPermissionType.ANY)]),
        [(C, CLUSTER_NAME, Op.ALTER)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    Row("DescribeConfigs topic", 32, 4, lambda: dc.DescribeConfigsRequest(resources=[dc.DescribeConfigsResource(
        resource_type=2, resource_name=TOPIC, configuration_keys=None)]),
        [(T, TOPIC, Op.DESCRIBE_CONFIGS)], ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    Row("DescribeConfigs broker", 32, 4, lambda: dc.DescribeConfigsRequest(resources=[dc.DescribeConfigsResource(
        resource_type=4, resource_name="1", configuration_keys=None)]),
        [(C, CLUSTER_NAME, Op.DESCRIBE_CONFIGS)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    Row("AlterConfigs", 33, 2, lambda: ac.AlterConfigsRequest(validate_only=True, resources=[ac.AlterConfigsResource(
        resource_type=2, resource_name=TOPIC, configs=[ac.AlterableConfig(name="retention.ms", value="1000")])]),
        [(T, TOPIC, Op.ALTER_CONFIGS)], ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    Row("AlterReplicaLogDirs", 34, 2, lambda: arld.AlterReplicaLogDirsRequest(dirs=[arld.AlterReplicaLogDir(
        path="/nowhere", topics=[arld.AlterReplicaLogDirTopic(name=TOPIC, partitions=[0])])]),
        [(C, CLUSTER_NAME, Op.ALTER)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    Row("DescribeLogDirs", 35, 4, lambda: dld.DescribeLogDirsRequest(topics=None),
        [(C, CLUSTER_NAME, Op.DESCRIBE)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    Row("CreatePartitions", 37, 3, lambda: cp.CreatePartitionsRequest(validate_only=True, topics=[
        cp.CreatePartitionsTopic(name=TOPIC, count=2)]), [(T, TOPIC, Op.ALTER)], ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    Row("DeleteGroups", 42, 2, lambda: dg.DeleteGroupsRequest(groups_names=["no-such-group"]),
        [(G, "no-such-group", Op.DELETE)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    Row("ElectLeaders", 43, 2, lambda: el.ElectLeadersRequest(election_type=0, topic_partitions=[
        el.TopicPartitions(topic=TOPIC, partitions=[0])]), [(C, CLUSTER_NAME, Op.ALTER)],
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    Row("IncrementalAlterConfigs", 44, 1, lambda: iac.IncrementalAlterConfigsRequest(
        validate_only=True, resources=[iac.AlterConfigsResource(resource_type=2, resource_name=TOPIC, configs=[
            iac.AlterableConfig(name="retention.ms", config_operation=0, value="1000")])]),
        [(T, TOPIC, Op.ALTER_CONFIGS)], ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    Row("AlterPartitionReassignments", 45, 0, lambda: pr.AlterPartitionReassignmentsRequest(topics=[]),
        [(C, CLUSTER_NAME, Op.ALTER)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    Row("ListPartitionReassignments", 46, 0, lambda: pr.ListPartitionReassignmentsRequest(topics=None),
        [(C, CLUSTER_NAME, Op.DESCRIBE)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    Row("OffsetDelete", 47, 0, lambda: od.OffsetDeleteRequest(group_id=GROUP, topics=[od.OffsetDeleteRequestTopic(
        name=TOPIC, partitions=[od.OffsetDeleteRequestPartition(partition_index=0)])]),
        [(G, GROUP, Op.DELETE), (T, TOPIC, Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    Row("DescribeUserScramCredentials", 50, 0, lambda: usc.DescribeUserScramCredentialsRequest(users=None),
        [(C, CLUSTER_NAME, Op.DESCRIBE)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    Row("AlterUserScramCredentials", 51, 0, lambda: usc.AlterUserScramCredentialsRequest(
        deletions=[usc.ScramCredentialDeletion(name="nobody-at-all", mechanism=1)], upsertions=[]),
        [(C, CLUSTER_NAME, Op.ALTER)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    Row("DescribeQuorum", 55, 0, lambda: dq.DescribeQuorumRequest(topics=[dq.DescribeQuorumTopicRequest(
        topic_name="__cluster_metadata", partitions=[dq.DescribeQuorumPartitionRequest(partition_index=0)])]),
        [(C, CLUSTER_NAME, Op.DESCRIBE)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    Row("DescribeProducers", 61, 0, lambda: dp.DescribeProducersRequest(topics=[dp.TopicRequest(
        name=TOPIC, partition_indexes=[0])]), [(T, TOPIC, Op.READ)], ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    Row("DescribeTransactions", 65, 0, lambda: dtx.DescribeTransactionsRequest(transactional_ids=[TXN]),
        [(X, TXN, Op.DESCRIBE)], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    Row("DescribeTopicPartitions", 75, 0, lambda: dtp.DescribeTopicPartitionsRequest(topics=[dtp.TopicRequest(
        name=TOPIC)]), [(T, TOPIC, Op.DESCRIBE)], ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    Row("ConsumerGroupHeartbeat", 68, 1, lambda: cgh.ConsumerGroupHeartbeatRequest(
        group_id="kip848-group", member_id="m848", member_epoch=0, rebalance_timeout_ms=10000,
        subscribed_topic_names=[TOPIC], topic_partitions=[]),
        [(G, "kip848-group", Op.READ), (T, TOPIC, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    Row("ConsumerGroupDescribe", 69, 0, lambda: cgd.ConsumerGroupDescribeRequest(group_ids=[GROUP]),
        [(G, GROUP, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    Row("ShareGroupHeartbeat", 76, 1, lambda: sgh.ShareGroupHeartbeatRequest(
        group_id="kip932-group", member_id="m932", member_epoch=0, subscribed_topic_names=[TOPIC]),
        [(G, "kip932-group", Op.READ), (T, TOPIC, Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    Row("ShareGroupDescribe", 77, 1, lambda: sgd.ShareGroupDescribeRequest(group_ids=["kip932-group"]),
        [(G, "kip932-group", Op.DESCRIBE)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    Row("ShareFetch", 78, 1, lambda: sf.ShareFetchRequest(
        group_id="kip932-group", member_id="m932", share_session_epoch=0, max_wait_ms=0, min_bytes=1,
        max_records=10, batch_size=10, topics=[]),
        [(G, "kip932-group", Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    Row("ShareAcknowledge", 79, 1, lambda: sf.ShareAcknowledgeRequest(
        group_id="kip932-group", member_id="m932", share_session_epoch=1, topics=[]),
        [(G, "kip932-group", Op.READ)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    Row("InitializeShareGroupState", 83, 0, lambda: sgs.InitializeShareGroupStateRequest(
        group_id="kip932-group", topics=[sgs.InitializeTopic(topic_id=__import__("uuid").UUID(int=7), partitions=[
            sgs.InitializePartition(partition=0, state_epoch=0, start_offset=0)])]),
        [(C, CLUSTER_NAME, Op.CLUSTER_ACTION)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED, inter_broker=True),
    Row("ReadShareGroupState", 84, 0, lambda: sgs.ReadShareGroupStateRequest(
        group_id="kip932-group", topics=[sgs.ReadTopic(topic_id=__import__("uuid").UUID(int=7), partitions=[
            sgs.ReadPartition(partition=0, leader_epoch=0)])]),
        [(C, CLUSTER_NAME, Op.CLUSTER_ACTION)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED, inter_broker=True),
    Row("WriteShareGroupState", 85, 0, lambda: sgs.WriteShareGroupStateRequest(
        group_id="kip932-group", topics=[sgs.WriteTopic(topic_id=__import__("uuid").UUID(int=7), partitions=[
            sgs.WritePartition(partition=0, state_epoch=0, leader_epoch=0, start_offset=0)])]),
        [(C, CLUSTER_NAME, Op.CLUSTER_ACTION)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED, inter_broker=True),
    Row("DeleteShareGroupState", 86, 0, lambda: sgs.DeleteShareGroupStateRequest(
        group_id="kip932-group", topics=[sgs.DeleteTopic(topic_id=__import__("uuid").UUID(int=7), partitions=[
            sgs.DeletePartition(partition=0)])]),
        [(C, CLUSTER_NAME, Op.CLUSTER_ACTION)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED, inter_broker=True),
    Row("GetReplicaLogInfo", 93, 0, lambda: grl.GetReplicaLogInfoRequest(topic_partitions=[grl.TopicPartitions(
        topic_id=__import__("uuid").UUID(int=7), partitions=[0])]),
        [(C, CLUSTER_NAME, Op.CLUSTER_ACTION)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED, inter_broker=True),
]


async def grant(server: BrokerServer, principal: str, needs: list[tuple[int, str, int]]) -> None:
    resp = await call(server, 30, 3, ca.CreateAclsRequest(creations=[ca.AclCreation(
        resource_type=rt, resource_name=name, resource_pattern_type=PatternType.LITERAL, principal=principal,
        host="*", operation=op, permission_type=AclPermissionType.ALLOW) for rt, name, op in needs]), ADMIN)
    assert codes(resp) == {0}, resp


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BrokerServer]:
    data: Path = tmp_path_factory.mktemp("authz")
    s = BrokerServer(BrokerConfig(listen="127.0.0.1:0", inter_broker_listen="127.0.0.1:0",
                                  controller_listen="127.0.0.1:0", data_dir=str(data), authorizer=True,
                                  super_users=ADMIN, offsets_topic_num_partitions=1,
                                  transaction_state_num_partitions=1, group_initial_rebalance_delay_ms=0,
                                  transaction_two_phase_commit_enable=True))
    await s.start()
    try:
        for name in (TOPIC, MARKED):
            resp = await call(s, 19, 7, ct.CreateTopicsRequest(topics=[ct.CreatableTopic(
                name=name, num_partitions=1, replication_factor=1)]), ADMIN)
            assert codes(resp) == {0}, resp
        yield s
    finally:
        await s.stop()


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
async def test_a_principal_without_the_acls_is_refused(server: BrokerServer, row: Row) -> None:
    resp = await call(server, row.key, row.version, row.request(), "User:nobody", row.inter_broker)
    assert row.denied in codes(resp), resp


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
async def test_a_principal_with_the_acls_is_not_refused(server: BrokerServer, row: Row) -> None:
    who = "User:" + row.name.replace(" ", "-").replace(",", "")
    await grant(server, who, row.needs)
    resp = await call(server, row.key, row.version, row.request(), who, row.inter_broker)
    assert not codes(resp) & AUTH_ERRORS, resp


async def until_served(server: BrokerServer, key: int, version: int, request: Any, who: str,
                       timeout: float = 30.0) -> Any:
    """The answer once it carries no error: a coordinator still loading answers NOT_COORDINATOR or
    COORDINATOR_LOAD_IN_PROGRESS first (when this test runs before any other used it)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        resp = await call(server, key, version, request, who)
        if not codes(resp) or codes(resp) == {0} or loop.time() > deadline:
            return resp
        await asyncio.sleep(0.1)


async def test_listings_leave_out_what_the_principal_may_not_describe(server: BrokerServer) -> None:
    """Metadata of every topic, ListGroups and ListTransactions show only what may be described."""
    who = "User:lister"
    await grant(server, who, [(T, MARKED, Op.DESCRIBE)])
    every = await call(server, 3, 12, md.MetadataRequest(topics=None), who)
    assert {t.name for t in every.topics} == {MARKED}
    admin_view = await call(server, 3, 12, md.MetadataRequest(topics=None), ADMIN)
    assert {TOPIC, MARKED} <= {t.name for t in admin_view.topics}
    committed = await until_served(server, 8, 8, oc.OffsetCommitRequest(group_id="listed", member_id="", topics=[
        oc.OffsetCommitRequestTopic(name=TOPIC, partitions=[oc.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=0, committed_metadata="")])]), ADMIN)
    assert codes(committed) == {0}, committed
    assert "listed" in {g.group_id for g in (await call(server, 16, 4, lgr.ListGroupsRequest(), ADMIN)).groups}
    assert (await call(server, 16, 4, lgr.ListGroupsRequest(), who)).groups == []
    await grant(server, who, [(G, "listed", Op.DESCRIBE)])
    assert [g.group_id for g in (await call(server, 16, 4, lgr.ListGroupsRequest(), who)).groups] == ["listed"]
    # as a client does: FindCoordinator first (it creates __transaction_state), then InitProducerId
    found = await until_served(server, 10, 4, fc.FindCoordinatorRequest(key_type=1, coordinator_keys=["listed-tx"]),
                               ADMIN)
    assert codes(found) == {0}, found
    resp = await until_served(server, 22, 4, ipi.InitProducerIdRequest(transactional_id="listed-tx",
                                                                      transaction_timeout_ms=60000), ADMIN)
    assert resp.error_code == 0
    assert "listed-tx" in {t.transactional_id for t in (await call(server, 66, 1, ltx.ListTransactionsRequest(), ADMIN)).transaction_states}
    assert (await call(server, 66, 1, ltx.ListTransactionsRequest(), who)).transaction_states == []


async def test_find_coordinator_key_type_2_names_the_share_coordinator(server: BrokerServer) -> None:
    """Kafka 4's share coordinator key "group:topicId:partition" (v6+): the leader of its partition of
    __share_group_state; before v6, or a key not of that form, is INVALID_REQUEST."""
    key = f"sg:{__import__('uuid').UUID(int=9)}:3"
    found = await until_served(server, 10, 6, fc.FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), ADMIN)
    assert [(c.key, c.error_code, c.node_id) for c in found.coordinators] == [(key, 0, server.cfg.node_id)], found
    old = await call(server, 10, 5, fc.FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), ADMIN)
    assert [c.error_code for c in old.coordinators] == [ErrorCode.INVALID_REQUEST]
    bad = await call(server, 10, 6, fc.FindCoordinatorRequest(key_type=2, coordinator_keys=["sg:nope:x"]), ADMIN)
    assert [c.error_code for c in bad.coordinators] == [ErrorCode.INVALID_REQUEST]


async def test_the_acl_apis_answer_security_disabled_without_the_authorizer(tmp_path: Path) -> None:
    s = BrokerServer(BrokerConfig(listen="127.0.0.1:0", inter_broker_listen="127.0.0.1:0",
                                  controller_listen="127.0.0.1:0", data_dir=str(tmp_path)))
    await s.start()
    try:
        resp = await call(s, 29, 3, dacl.DescribeAclsRequest(resource_type_filter=1, pattern_type_filter=1,
                                                             operation=1, permission_type=1), "User:anyone")
        assert resp.error_code == ErrorCode.SECURITY_DISABLED
        resp = await call(s, 30, 3, ca.CreateAclsRequest(creations=[ca.AclCreation(
            resource_type=T, resource_name="t", resource_pattern_type=3, principal="User:a", host="*",
            operation=Op.READ, permission_type=AclPermissionType.ALLOW)]), "User:anyone")
        assert codes(resp) == {ErrorCode.SECURITY_DISABLED}
    finally:
        await s.stop()


async def test_create_describe_delete_acls_through_the_controller(server: BrokerServer) -> None:
    binding = AclBinding(T, "pay-", PatternType.PREFIXED, "User:carol", "*", Op.WRITE, AclPermissionType.DENY)
    req = ca.CreateAclsRequest(creations=[ca.AclCreation(
        resource_type=binding.resource_type, resource_name=binding.resource_name,
        resource_pattern_type=binding.pattern_type, principal=binding.principal, host=binding.host,
        operation=binding.operation, permission_type=binding.permission), ca.AclCreation(
        resource_type=C, resource_name="not-the-cluster", resource_pattern_type=3, principal="User:carol", host="*",
        operation=Op.ALTER, permission_type=AclPermissionType.ALLOW)])
    resp = await call(server, 30, 3, req, ADMIN)
    assert [r.error_code for r in resp.results] == [0, ErrorCode.INVALID_REQUEST]
    assert binding in server.metadata.image.acls.values()
    described = await call(server, 29, 3, dacl.DescribeAclsRequest(
        resource_type_filter=T, resource_name_filter="pay-eu", pattern_type_filter=PatternType.MATCH,
        operation=Op.ANY, permission_type=AclPermissionType.ANY), ADMIN)
    assert [(r.resource_name, r.pattern_type, [a.principal for a in r.acls]) for r in described.resources] == [
        ("pay-", PatternType.PREFIXED, ["User:carol"])]
    deleted = await call(server, 31, 3, da.DeleteAclsRequest(filters=[da.DeleteAclsFilter(
        resource_type_filter=ResourceType.ANY, pattern_type_filter=PatternType.ANY, principal_filter="User:carol",
        operation=Op.ANY, permission_type=AclPermissionType.ANY)]), ADMIN)
    assert [m.resource_name for m in deleted.filter_results[0].matching_acls] == ["pay-"]
    assert binding not in server.metadata.image.acls.values()


async def test_a_consumer_group_member_needs_describe_on_the_topics_it_names(server: BrokerServer) -> None:
    """Kafka's ConsumerGroupHeartbeat: READ on the group is not enough, each subscribed topic needs
    DESCRIBE (TOPIC_AUTHORIZATION_FAILED), or a member would learn of topics it may not see."""
    who = "User:kip848-reader"
    await grant(server, who, [(G, "kip848-topicless", Op.READ)])
    req = cgh.ConsumerGroupHeartbeatRequest(group_id="kip848-topicless", member_id="m-t", member_epoch=0,
                                            rebalance_timeout_ms=10000, subscribed_topic_names=[TOPIC],
                                            topic_partitions=[])
    resp = await call(server, 68, 1, req, who)
    assert codes(resp) == {ErrorCode.TOPIC_AUTHORIZATION_FAILED}, resp
    await grant(server, who, [(T, TOPIC, Op.DESCRIBE)])
    resp = await call(server, 68, 1, req, who)
    assert not codes(resp) & AUTH_ERRORS, resp


async def test_a_share_group_member_needs_read_on_the_topics_it_fetches(server: BrokerServer) -> None:
    """Kafka's ShareFetch: READ on the group, then READ on each topic (TOPIC_AUTHORIZATION_FAILED for
    the partitions of a topic the member may not read)."""
    who = "User:kip932-reader"
    await grant(server, who, [(G, "kip932-topics", Op.READ)])
    tid = server.topics.image.topics[TOPIC].topic_id

    def fetch(epoch: int) -> sf.ShareFetchRequest:
        return sf.ShareFetchRequest(group_id="kip932-topics", member_id="m-r", share_session_epoch=epoch,
                                    max_wait_ms=0, min_bytes=1, max_records=10, batch_size=10, topics=[
                                        sf.ShareFetchTopic(topic_id=tid, partitions=[
                                            sf.ShareFetchPartition(partition_index=0)])])
    resp = await call(server, 78, 1, fetch(0), who)
    assert codes(resp) == {0, ErrorCode.TOPIC_AUTHORIZATION_FAILED}, resp
    await grant(server, who, [(T, TOPIC, Op.READ)])
    # the share-partition's state is read and written through the share coordinator, over the
    # inter-broker connection, whose principal must hold CLUSTER_ACTION (docs/security.md)
    await grant(server, "User:ANONYMOUS", [(C, CLUSTER_NAME, Op.CLUSTER_ACTION)])
    resp = await call(server, 78, 1, fetch(0), who)
    assert not codes(resp) & AUTH_ERRORS, resp


async def test_two_phase_commit_needs_its_own_acl_beside_write(server: BrokerServer) -> None:
    """KIP-939: InitProducerId with Enable2Pc asks for WRITE and TWO_PHASE_COMMIT on the
    transactional id. WRITE alone -- what every transactional producer has -- must not let it mark
    the id two-phase: a prepared transaction holds the LSO back and is never timed out."""
    who = "User:writer-only"
    await grant(server, who, [(X, "tx-2pc-w", Op.WRITE)])
    found = await until_served(server, 10, 4, fc.FindCoordinatorRequest(key_type=1, coordinator_keys=["tx-2pc-w"]),
                               ADMIN)
    assert codes(found) == {0}, found
    two_phase = ipi.InitProducerIdRequest(transactional_id="tx-2pc-w", transaction_timeout_ms=60000, enable_2pc=True)
    resp = await call(server, 22, 6, two_phase, who)
    assert resp.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, resp
    plain = ipi.InitProducerIdRequest(transactional_id="tx-2pc-w", transaction_timeout_ms=60000)
    resp = await until_served(server, 22, 6, plain, who)
    assert resp.error_code == 0, resp
    await grant(server, who, [(X, "tx-2pc-w", Op.TWO_PHASE_COMMIT)])
    resp = await until_served(server, 22, 6, two_phase, who)
    assert resp.error_code == 0, resp
