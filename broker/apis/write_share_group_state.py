"""WriteShareGroupState (85): a share-partition leader writes the state of a share-partition (its
start offset and in-flight runs) to the share coordinator, which answers once `__share_group_state`'s
in-sync replicas have it. Brokers only: CLUSTER_ACTION."""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.share_group_state import (
    PartitionResult,
    TopicResult,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)

from ..context import BrokerContext, ClientInfo
from ..share.manager import StoredState
from ..share.partition_state import StateRun
from .read_share_group_state import may_act

KEY = 85
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
    allowed = may_act(ctx, client)
    out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if not allowed or ctx.share_coordinator is None:
                parts.append(PartitionResult(partition=p.partition, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
                continue
            state = StoredState(p.state_epoch, p.start_offset, tuple(
                StateRun(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches))
            err = await ctx.share_coordinator.write((req.group_id, t.topic_id, p.partition), p.leader_epoch, state)
            parts.append(PartitionResult(partition=p.partition, error_code=err))
        out.append(TopicResult(topic_id=t.topic_id, partitions=parts))
    return WriteShareGroupStateResponse(results=out)
