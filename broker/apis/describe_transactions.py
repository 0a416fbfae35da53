"""DescribeTransactions (65): the coordinator's view of transactional ids (KIP-664 tooling).

An id this broker does not coordinate answers NOT_COORDINATOR (the admin client then asks
FindCoordinator); an id it coordinates but does not know answers TRANSACTIONAL_ID_NOT_FOUND.
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)

from ..context import BrokerContext, ClientInfo

KEY = 65
ORDERED = False


def _one(ctx: BrokerContext, tid: str) -> TransactionState:
    coord = ctx.txn
    meta = coord.describe(tid) if coord.owns(tid) else None
    if meta is None:
        code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND if coord.owns(tid) else ErrorCode.NOT_COORDINATOR
        return TransactionState(error_code=code, transactional_id=tid, transaction_state="", transaction_timeout_ms=0,
                                transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[])
    by_topic: dict[str, list[int]] = {}
    for topic, part in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(part)
    return TransactionState(
        error_code=0, transactional_id=tid, transaction_state=coord.visible_state(meta).wire_name,
        transaction_timeout_ms=meta.timeout_ms, transaction_start_time_ms=meta.start_ms,
        producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
        topics=[TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()])


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(throttle_time_ms=0,
                                        transaction_states=[_one(ctx, t) for t in req.transactional_ids])
