"""OffsetDelete (47): drop a group's committed offsets for some partitions (kafka-consumer-groups
--delete-offsets). The rules live in the group state machine (GroupStateMachine.delete_offsets);
a group-level error answers alone, without topics, as Kafka's does.
"""

from __future__ import annotations

from protocol.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
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
    authz = ctx.authorizer  # Kafka's checks: DELETE on the group, READ on each topic
    if not authz.allows(client, AclOperation.DELETE, ResourceType.GROUP, req.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = authz.allowed(client, AclOperation.READ, ResourceType.TOPIC, {t.name for t in req.topics})
    await ctx.groups.ensure_topic()
    partitions = [TopicPartition(t.name, p.partition_index) for t in req.topics for p in t.partitions
                  if t.name in readable]
    err, results = ctx.groups.delete_offsets(req.group_id, partitions)
    if err:
        return OffsetDeleteResponse(error_code=err)
    results.update({TopicPartition(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    for t in req.topics if t.name not in readable for p in t.partitions})
    return OffsetDeleteResponse(topics=[
        OffsetDeleteResponseTopic(name=t.name, partitions=[
            OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                          error_code=results[TopicPartition(t.name, p.partition_index)])
            for p in t.partitions])
        for t in req.topics
    ])
