"""InitProducerId (22): a producer id and epoch, for idempotent or transactional producers.

Without a transactional id the producer only needs a cluster-unique id: a fresh one from the
block allocator, epoch 0. With one, the transaction coordinator decides (docs/transactions.md): it may
fence an older instance, abort its open transaction first (answering CONCURRENT_TRANSACTIONS
while that completes) or rotate an exhausted id. v3+ requests may carry the producer's current
id and epoch to recover it rather than being fenced (KIP-360). v6 carries two-phase commit
(KIP-939): Enable2Pc and KeepPreparedTxn go to the coordinator, and the answer names the
transaction kept for the new instance (OngoingTxnProducerId/Epoch; -1 when none was).
"""

from __future__ import annotations

from protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

from ..context import BrokerContext, ClientInfo
from ..txn.wire_errors import for_version

KEY = 22
ORDERED = True  # runs alone on its connection, in request order (broker/connection.py)


def _refusal(ctx: BrokerContext, client: ClientInfo, req: InitProducerIdRequest) -> ErrorCode:
    """Kafka's checks: WRITE on the transactional id, and TWO_PHASE_COMMIT on it as well to enable
    two-phase commit (KIP-939: a prepared transaction holds the LSO back and no timeout ends it, so
    WRITE, which every transactional producer has, is not enough); for an idempotent producer
    IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679)."""
    authz = ctx.authorizer
    if req.transactional_id is not None:
        tid = req.transactional_id
        ok = authz.allows(client, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid) and (
            not req.enable_2pc or authz.allows(client, AclOperation.TWO_PHASE_COMMIT, ResourceType.TRANSACTIONAL_ID, tid))
        return ErrorCode.NONE if ok else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    ok = authz.allows(client, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME) or \
        authz.allows_any(client, AclOperation.WRITE, ResourceType.TOPIC)
    return ErrorCode.NONE if ok else ErrorCode.CLUSTER_AUTHORIZATION_FAILED


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: InitProducerIdRequest) -> InitProducerIdResponse:
    refused = _refusal(ctx, client, req)
    if refused:
        return InitProducerIdResponse(error_code=refused, producer_id=-1, producer_epoch=-1)
    if req.transactional_id is None:
        try:
            return InitProducerIdResponse(error_code=0, producer_id=ctx.producer_ids.allocate(), producer_epoch=0)
        except KafkaError as e:  # no producer-id block yet: retriable
            return InitProducerIdResponse(error_code=e.code, producer_id=-1, producer_epoch=-1)
    pid, epoch = (req.producer_id, req.producer_epoch) if header.api_version >= 3 else (-1, -1)
    d = await ctx.txn.init_producer_id(req.transactional_id, req.transaction_timeout_ms, pid, epoch,
                                       enable_2pc=req.enable_2pc, keep_prepared=req.keep_prepared_txn)
    if d.error:
        return InitProducerIdResponse(error_code=for_version(d.error, KEY, header.api_version), producer_id=-1,
                                      producer_epoch=-1)
    return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=d.producer_id,
                                  producer_epoch=d.producer_epoch, ongoing_txn_producer_id=d.ongoing_producer_id,
                                  ongoing_txn_producer_epoch=d.ongoing_producer_epoch)
