"""ConsumerGroupHeartbeat (68): a member of a KIP-848 consumer group joins, heartbeats, acknowledges its
revocations and leaves (broker/group/consumer.py decides; the answer waits for its records)."""

from __future__ import annotations

from protocol.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    HeartbeatAssignment,
    HeartbeatTopicPartitions,
)

from ..context import BrokerContext, ClientInfo
from ..group.consumer import ConsumerHeartbeat, to_topic_partitions
from .join_group import client_host

KEY = 68
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
    # Kafka's checks: READ on the group, then DESCRIBE on every topic the member names
    if not ctx.authorizer.allows(client, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    named = set(req.subscribed_topic_names or ())
    if named - ctx.authorizer.allowed(client, AclOperation.DESCRIBE, ResourceType.TOPIC, named):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    owned = None if req.topic_partitions is None else frozenset(
        (t.topic_id, p) for t in req.topic_partitions for p in t.partitions)
    r = await ctx.groups.consumer_heartbeat(ConsumerHeartbeat(
        req.group_id, req.member_id, req.member_epoch, req.instance_id, req.rack_id, req.rebalance_timeout_ms,
        None if req.subscribed_topic_names is None else tuple(req.subscribed_topic_names),
        req.subscribed_topic_regex if header.api_version >= 1 else None, req.server_assignor, owned,
        header.client_id or "", client_host(client)))
    assignment = None if r.assignment is None else HeartbeatAssignment(topic_partitions=[
        HeartbeatTopicPartitions(topic_id=t.topic_id, partitions=t.partitions) for t in to_topic_partitions(r.assignment)])
    return ConsumerGroupHeartbeatResponse(error_code=r.error, error_message=r.message, member_id=r.member_id,
                                          member_epoch=r.member_epoch, heartbeat_interval_ms=r.heartbeat_interval_ms,
                                          assignment=assignment)
