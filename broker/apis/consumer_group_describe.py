"""ConsumerGroupDescribe (69): members, epochs, subscriptions, current and target assignments of
KIP-848 consumer groups (a classic group answers GROUP_ID_NOT_FOUND, as in Kafka)."""

from __future__ import annotations

import uuid

from protocol.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedAssignment,
    DescribedConsumerGroup,
    DescribedConsumerMember,
    DescribedTopicPartitions,
)

from ..context import BrokerContext, ClientInfo
from ..group.assignors import Assignment
from ..group.consumer import to_topic_partitions
from ..group.state import GROUP_OPERATIONS

KEY = 69
ORDERED = False
NOT_REQUESTED = -2147483648


def _assignment(a: Assignment, names: dict[uuid.UUID, str]) -> DescribedAssignment:
    return DescribedAssignment(topic_partitions=[
        DescribedTopicPartitions(topic_id=t.topic_id, topic_name=names.get(t.topic_id, ""), partitions=t.partitions)
        for t in to_topic_partitions(a)])


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    await ctx.groups.ensure_topic()
    ops = GROUP_OPERATIONS if req.include_authorized_operations else NOT_REQUESTED
    out = []
    for gid in req.group_ids:
        err, s = ctx.groups.describe_consumer_group(gid)
        if not ctx.authorizer.allows(client, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            err, s = ErrorCode.GROUP_AUTHORIZATION_FAILED, None
        if s is None:
            out.append(DescribedConsumerGroup(error_code=err, group_id=gid, group_state="Dead", group_epoch=-1,
                                              assignment_epoch=-1, assignor_name="",
                                              error_message=f"Group {gid} not found." if err == ErrorCode.GROUP_ID_NOT_FOUND else None))
            continue
        out.append(DescribedConsumerGroup(
            error_code=0, group_id=gid, group_state=s.state, group_epoch=s.group_epoch,
            assignment_epoch=s.assignment_epoch, assignor_name=s.assignor, authorized_operations=ops,
            members=[DescribedConsumerMember(
                member_id=m.member.member_id, instance_id=m.member.instance_id, rack_id=m.member.rack_id,
                member_epoch=m.member.member_epoch, client_id=m.member.client_id, client_host=m.member.client_host,
                subscribed_topic_names=list(m.member.subscribed_topic_names),
                subscribed_topic_regex=m.member.subscribed_topic_regex,
                assignment=_assignment(m.member.assigned, s.topic_names),
                target_assignment=_assignment(m.target, s.topic_names)) for m in s.members]))
    return ConsumerGroupDescribeResponse(groups=out)
