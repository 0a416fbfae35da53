"""InitializeShareGroupState (83): the state of a new share-partition (its start offset, nothing in
flight) is written to the share coordinator. Brokers only: CLUSTER_ACTION."""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.share_group_state import (
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
    PartitionResult,
    TopicResult,
)

from ..context import BrokerContext, ClientInfo
from ..share.manager import StoredState
from .read_share_group_state import may_act

KEY = 83
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: InitializeShareGroupStateRequest) -> InitializeShareGroupStateResponse:
    allowed = may_act(ctx, client)
    out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if not allowed or ctx.share_coordinator is None:
                parts.append(PartitionResult(partition=p.partition, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
                continue
            err = await ctx.share_coordinator.write((req.group_id, t.topic_id, p.partition), -1,
                                                    StoredState(p.state_epoch, p.start_offset, ()))
            parts.append(PartitionResult(partition=p.partition, error_code=err))
        out.append(TopicResult(topic_id=t.topic_id, partitions=parts))
    return InitializeShareGroupStateResponse(results=out)
