"""ReadShareGroupState (84): a share-partition leader reads the durable state of its share-partitions
from the share coordinator (broker/share/coordinator.py). Brokers only: CLUSTER_ACTION."""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.share_group_state import (
    ReadPartitionResult,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadTopicResult,
    StateBatch,
)

from ..context import BrokerContext, ClientInfo
from .share_state_writes import may_act

KEY = 84
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
    allowed = may_act(ctx, client) and ctx.share_coordinator is not None
    out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if not allowed or ctx.share_coordinator is None:
                parts.append(ReadPartitionResult(partition=p.partition, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                 state_epoch=-1, start_offset=-1))
                continue
            err, st = ctx.share_coordinator.read((req.group_id, t.topic_id, p.partition), p.leader_epoch)
            parts.append(ReadPartitionResult(
                partition=p.partition, error_code=err, state_epoch=st.state_epoch if st else 0,
                start_offset=st.start_offset if st else -1,
                state_batches=[StateBatch(first_offset=r.first, last_offset=r.last, delivery_state=r.state,
                                          delivery_count=r.delivery_count) for r in st.runs] if st else []))
        out.append(ReadTopicResult(topic_id=t.topic_id, partitions=parts))
    return ReadShareGroupStateResponse(results=out)
