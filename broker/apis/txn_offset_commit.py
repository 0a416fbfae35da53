"""TxnOffsetCommit (28): a consumer group's offsets, committed as part of a transaction.

The producer sends it to the group coordinator after AddOffsetsToTxn. Before handing the offsets
to the group coordinator (which holds them pending until the transaction's marker reaches
`__consumer_offsets`), the same coordinator check as for a transactional produce is made: the
group's offsets partition must be in the producer's ongoing transaction, and the producer not
fenced. Without it a zombie could park offsets under a transaction that has already ended,
where no marker would ever resolve them. The check's VerificationGuard is taken before asking and
held by the append, so a marker that lands between the answer and the append refuses the append,
as for a produce. Both refusals are TRANSACTION_ABORTABLE for v4+ clients and INVALID_TXN_STATE
for older ones (wire_errors): the first is fatal to the producer, the second only to its
transaction.
"""

from __future__ import annotations

from protocol.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from protocol.topic_partition import TopicPartition

from ..context import BrokerContext, ClientInfo
from ..group import OFFSETS_TOPIC
from ..group.model import OffsetCommitIn
from ..txn.wire_errors import for_version

KEY = 28
ORDERED = True  # runs alone on its connection, in request order (broker/connection.py)

# What the coordinator check's verdicts mean to a TxnOffsetCommit client.
_VERIFY_ERRORS = {
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: ErrorCode.INVALID_TXN_STATE,
    ErrorCode.NOT_COORDINATOR: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}


def _answer(req: TxnOffsetCommitRequest, code_for: dict[TopicPartition, int]) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                             error_code=code_for.get(TopicPartition(t.name, p.partition_index), 0))
            for p in t.partitions])
        for t in req.topics])


def _every(req: TxnOffsetCommitRequest, code: int) -> dict[TopicPartition, int]:
    return {TopicPartition(t.name, p.partition_index): code for t in req.topics for p in t.partitions}


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    v = header.api_version
    # Kafka's checks: WRITE on the transactional id, READ on the group, READ on each topic
    authz = ctx.authorizer
    if not authz.allows(client, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return _answer(req, _every(req, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    if not authz.allows(client, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return _answer(req, _every(req, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    readable = authz.allowed(client, AclOperation.READ, ResourceType.TOPIC, {t.name for t in req.topics})
    if len(readable) < len({t.name for t in req.topics}):
        return _answer(req, {TopicPartition(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                             if t.name not in readable else ErrorCode.OPERATION_NOT_ATTEMPTED
                             for t in req.topics for p in t.partitions})
    offsets: dict[TopicPartition, OffsetCommitIn] = {
        TopicPartition(t.name, p.partition_index): OffsetCommitIn(offset=p.committed_offset,
                                                    leader_epoch=p.committed_leader_epoch if v >= 2 else -1,
                                                    metadata=p.committed_metadata)
        for t in req.topics for p in t.partitions}
    await ctx.groups.ensure_topic()
    offsets_partition = TopicPartition(OFFSETS_TOPIC, ctx.groups.partition_for(req.group_id))
    # Taken before asking, held by the append: a marker landing in between refuses the append.
    guard = ctx.groups.start_verification(req.group_id, req.producer_id)
    # The transaction coordinator is often another broker: asked over the wire then (KIP-890's path).
    verdict = await ctx.txn.verify_anywhere(req.transactional_id, req.producer_id, req.producer_epoch,
                                            [offsets_partition])
    if verdict:
        code = for_version(_VERIFY_ERRORS.get(ErrorCode(verdict), verdict), KEY, v)
        return _answer(req, dict.fromkeys(offsets, code))
    errors = await ctx.groups.prepare_txn_offsets(
        req.group_id, req.producer_id, req.producer_epoch, offsets,
        member_id=req.member_id if v >= 3 else "",
        group_instance_id=req.group_instance_id if v >= 3 else None,
        generation=req.generation_id if v >= 3 else -1, guard=guard)
    return _answer(req, {tp: for_version(code, KEY, v) for tp, code in errors.items()})
