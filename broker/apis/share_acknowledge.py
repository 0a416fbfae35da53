"""ShareAcknowledge (79): a share-group member acknowledges records (ACCEPT, RELEASE, REJECT) without
fetching; answered once the new state is durable. Epoch -1 closes the member's share session, and
what it still holds is released to the others. Kafka's checks: READ on the group and on each topic."""

from __future__ import annotations

import uuid

from protocol.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.share_fetch import (
    LeaderIdAndEpoch,
    ShareAcknowledgePartitionData,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)

from ..context import BrokerContext, ClientInfo
from .share_fetch import acks_of, apply_acks, current_leader, unreadable

KEY = 79
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    shares = ctx.shares
    if shares is None:
        return ShareAcknowledgeResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    group, member = req.group_id or "", req.member_id or ""
    if not group or not member:
        return ShareAcknowledgeResponse(error_code=ErrorCode.INVALID_REQUEST,
                                        error_message="GroupId and MemberId must be set.")
    if not ctx.authorizer.allows(client, AclOperation.READ, ResourceType.GROUP, group):
        return ShareAcknowledgeResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    step = shares.sessions.acknowledge((group, member), req.share_session_epoch)
    if step.error:
        return ShareAcknowledgeResponse(error_code=step.error)
    acks = acks_of(req.topics)
    results = await apply_acks(shares, group, member, acks, unreadable(ctx, client, list(acks)))
    if step.closing:
        await shares.release(group, member, step.partitions)
    topics: dict[uuid.UUID, list[ShareAcknowledgePartitionData]] = {}
    for (tid, index), err in results.items():
        leader = current_leader(ctx, tid, index) if err == ErrorCode.NOT_LEADER_OR_FOLLOWER else LeaderIdAndEpoch()
        topics.setdefault(tid, []).append(ShareAcknowledgePartitionData(partition_index=index, error_code=err,
                                                                        current_leader=leader))
    return ShareAcknowledgeResponse(responses=[ShareAcknowledgeTopicResponse(topic_id=tid, partitions=ps)
                                               for tid, ps in topics.items()])
