"""DeleteShareGroupState (86): the share coordinator forgets share-partitions (a tombstone each).
Brokers only: CLUSTER_ACTION."""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.share_group_state import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
    PartitionResult,
    TopicResult,
)

from ..context import BrokerContext, ClientInfo
from .read_share_group_state import may_act

KEY = 86
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
    allowed = may_act(ctx, client)
    out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if not allowed or ctx.share_coordinator is None:
                parts.append(PartitionResult(partition=p.partition, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
                continue
            err = await ctx.share_coordinator.write((req.group_id, t.topic_id, p.partition), -1, None)
            parts.append(PartitionResult(partition=p.partition, error_code=err))
        out.append(TopicResult(topic_id=t.topic_id, partitions=parts))
    return DeleteShareGroupStateResponse(results=out)
