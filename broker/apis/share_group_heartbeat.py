"""ShareGroupHeartbeat (76): a member of a KIP-932 share group joins, heartbeats and leaves
(broker/group/share.py decides; the answer waits for its records). Kafka's checks: READ on the
group, then DESCRIBE on every topic the member names."""

from __future__ import annotations

from protocol.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.share_group_heartbeat import (
    ShareAssignment,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    ShareTopicPartitions,
)

from ..context import BrokerContext, ClientInfo
from ..group.consumer import to_topic_partitions
from ..group.share import ShareHeartbeat
from .join_group import client_host

KEY = 76
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    if not ctx.authorizer.allows(client, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    named = set(req.subscribed_topic_names or ())
    if named - ctx.authorizer.allowed(client, AclOperation.DESCRIBE, ResourceType.TOPIC, named):
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    r = await ctx.groups.share_heartbeat(ShareHeartbeat(
        req.group_id, req.member_id, req.member_epoch, req.rack_id,
        None if req.subscribed_topic_names is None else tuple(req.subscribed_topic_names),
        header.client_id or "", client_host(client)))
    assignment = None if r.assignment is None else ShareAssignment(topic_partitions=[
        ShareTopicPartitions(topic_id=t.topic_id, partitions=t.partitions) for t in to_topic_partitions(r.assignment)])
    return ShareGroupHeartbeatResponse(error_code=r.error, error_message=r.message, member_id=r.member_id,
                                       member_epoch=r.member_epoch, heartbeat_interval_ms=r.heartbeat_interval_ms,
                                       assignment=assignment)
