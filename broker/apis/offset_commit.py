"""OffsetCommit (8): store a group's positions; each partition is answered only once on disk."""

from __future__ import annotations

from protocol.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from protocol.topic_partition import TopicPartition

from ..context import BrokerContext, ClientInfo
from ..group.model import OffsetCommitIn

KEY = 8
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: OffsetCommitRequest) -> OffsetCommitResponse:
    authz = ctx.authorizer
    refused: dict[TopicPartition, int] = {}
    if not authz.allows(client, AclOperation.READ, ResourceType.GROUP, req.group_id):
        refused = {TopicPartition(t.name, p.partition_index): ErrorCode.GROUP_AUTHORIZATION_FAILED
                   for t in req.topics for p in t.partitions}
    else:  # READ on each topic: the others' partitions are refused, the rest committed
        readable = authz.allowed(client, AclOperation.READ, ResourceType.TOPIC, {t.name for t in req.topics})
        refused = {TopicPartition(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                   for t in req.topics if t.name not in readable for p in t.partitions}
    await ctx.groups.ensure_topic()
    v = header.api_version
    offsets: dict[TopicPartition, OffsetCommitIn] = {}
    for t in req.topics:
        for p in t.partitions:
            if TopicPartition(t.name, p.partition_index) in refused:
                continue
            offsets[TopicPartition(t.name, p.partition_index)] = OffsetCommitIn(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if v >= 6 else -1,
                metadata=p.committed_metadata,
                commit_timestamp=p.commit_timestamp if v == 1 else -1,
            )
    errors = {} if refused and not offsets else await ctx.groups.commit_offsets(
        req.group_id,
        req.member_id if v >= 1 else "",
        req.group_instance_id if v >= 7 else None,
        req.generation_id_or_member_epoch if v >= 1 else -1,
        offsets,
        retention_ms=req.retention_time_ms if 2 <= v <= 4 else -1,
        api_version=v,
    )
    errors = {**errors, **refused}
    return OffsetCommitResponse(topics=[
        OffsetCommitResponseTopic(name=t.name, partitions=[
            OffsetCommitResponsePartition(partition_index=p.partition_index,
                                          error_code=errors[TopicPartition(t.name, p.partition_index)])
            for p in t.partitions
        ])
        for t in req.topics
    ])
