"""AddPartitionsToTxn (24): register partitions with the producer's transaction before writing.

v0-3 come from producers, one transaction per request. v4+ is the broker-to-broker form
(KIP-890): many transactions per request, and `verify_only` asks whether partitions are already
in the ongoing transaction without adding them — the check a partition leader makes before
accepting a transactional produce. Every partition is validated first: if any is unknown,
nothing is added and the others answer OPERATION_NOT_ATTEMPTED, as in Kafka.
"""

from __future__ import annotations

from protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTopicResult,
)
from protocol.topic_partition import TopicPartition

from ..context import BrokerContext, ClientInfo
from ..txn.wire_errors import for_version

KEY = 24
ORDERED = True  # runs alone on its connection, in request order (broker/connection.py)


def _results(topics: list[AddPartitionsToTxnTopic], code_for: dict[TopicPartition, int],
             default: int) -> list[AddPartitionsToTxnTopicResult]:
    return [AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=[
        AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code_for.get(TopicPartition(t.name, p), default))
        for p in t.partitions]) for t in topics]


async def _one(ctx: BrokerContext, tid: str, pid: int, epoch: int, topics: list[AddPartitionsToTxnTopic],
               verify_only: bool, version: int) -> list[AddPartitionsToTxnTopicResult]:
    wanted = [TopicPartition(t.name, p) for t in topics for p in t.partitions]
    if verify_only:
        # The asking leader holds the partitions; what it asks is the transaction's state, which
        # only the id's coordinator knows -- a broker just restarted, with no topics in its
        # metadata yet, answers NOT_COORDINATOR, not UNKNOWN_TOPIC_OR_PARTITION (seed 3507).
        return _results(topics, {}, for_version(ctx.txn.verify(tid, pid, epoch, wanted), KEY, version))
    unknown = {tp: int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for tp in wanted  # in the cluster, not just here
               if not ctx.topics.exists(tp[0], tp[1])}
    if unknown:
        return _results(topics, unknown, ErrorCode.OPERATION_NOT_ATTEMPTED)
    code = await ctx.txn.add_partitions(tid, pid, epoch, wanted)
    return _results(topics, {}, for_version(code, KEY, version))


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    v = header.api_version
    authz = ctx.authorizer
    if v <= 3:
        topics, tid = req.v3_and_below_topics, req.v3_and_below_transactional_id
        # Kafka's checks: WRITE on the transactional id, then on each topic (the partitions of the
        # others are then OPERATION_NOT_ATTEMPTED: nothing is added)
        refused: dict[TopicPartition, int] = {}
        if not authz.allows(client, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
            refused = {TopicPartition(t.name, p): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                       for t in topics for p in t.partitions}
        else:
            writable = authz.allowed(client, AclOperation.WRITE, ResourceType.TOPIC, {t.name for t in topics})
            refused = {TopicPartition(t.name, p): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                       for t in topics if t.name not in writable for p in t.partitions}
        if refused:
            return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=_results(
                topics, refused, ErrorCode.OPERATION_NOT_ATTEMPTED))
        res = await _one(ctx, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                         req.v3_and_below_producer_epoch, req.v3_and_below_topics, False, v)
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=res)
    if not client.inter_broker or not authz.allows(client, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER,
                                                   CLUSTER_NAME):
        # v4+ is the broker-to-broker form (Kafka authorizes it as CLUSTER_ACTION): a client
        # could otherwise ask about, or add partitions to, anyone's transaction.
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                          results_by_transaction=[])
    out = []
    for t in req.transactions:
        res = await _one(ctx, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only, v)
        out.append(AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=res))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=out)
