"""OffsetDelete (47): drop a group's committed offsets for some partitions (kafka-consumer-groups
--delete-offsets). The rules live in the group state machine (GroupStateMachine.delete_offsets);
a group-level error answers alone, without topics, as Kafka's does.
"""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from protocol.topic_partition import TopicPartition

from ..context import BrokerContext, ClientInfo

KEY = 47
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    await ctx.groups.ensure_topic()
    partitions = [TopicPartition(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    err, results = ctx.groups.delete_offsets(req.group_id, partitions)
    if err:
        return OffsetDeleteResponse(error_code=err)
    return OffsetDeleteResponse(topics=[
        OffsetDeleteResponseTopic(name=t.name, partitions=[
            OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                          error_code=results[TopicPartition(t.name, p.partition_index)])
            for p in t.partitions])
        for t in req.topics
    ])
