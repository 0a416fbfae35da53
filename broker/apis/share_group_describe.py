"""ShareGroupDescribe (77): members, epochs, subscriptions and assignments of KIP-932 share groups
(any other kind of group answers GROUP_ID_NOT_FOUND, as in Kafka). DESCRIBE on the group."""

from __future__ import annotations

import uuid

from protocol.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.share_group_describe import (
    ShareDescribedAssignment,
    ShareDescribedGroup,
    ShareDescribedMember,
    ShareDescribedTopicPartitions,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)

from ..context import BrokerContext, ClientInfo
from ..group.assignors import Assignment
from ..group.consumer import to_topic_partitions
from ..group.share import ASSIGNOR_NAME
from ..group.state import GROUP_OPERATIONS

KEY = 77
ORDERED = False
NOT_REQUESTED = -2147483648


def _assignment(a: Assignment, names: dict[uuid.UUID, str]) -> ShareDescribedAssignment:
    return ShareDescribedAssignment(topic_partitions=[
        ShareDescribedTopicPartitions(topic_id=t.topic_id, topic_name=names.get(t.topic_id, ""), partitions=t.partitions)
        for t in to_topic_partitions(a)])


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
    await ctx.groups.ensure_topic()
    ops = GROUP_OPERATIONS if req.include_authorized_operations else NOT_REQUESTED
    out = []
    for gid in req.group_ids:
        err, s = ctx.groups.describe_share_group(gid)
        if not ctx.authorizer.allows(client, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            err, s = ErrorCode.GROUP_AUTHORIZATION_FAILED, None
        if s is None:
            out.append(ShareDescribedGroup(error_code=err, group_id=gid, group_state="Dead", group_epoch=-1,
                                           assignment_epoch=-1, assignor_name="",
                                           error_message=f"Group {gid} not found." if err == ErrorCode.GROUP_ID_NOT_FOUND
                                           else None))
            continue
        out.append(ShareDescribedGroup(
            error_code=0, group_id=gid, group_state=s.state, group_epoch=s.group_epoch,
            assignment_epoch=s.assignment_epoch, assignor_name=ASSIGNOR_NAME, authorized_operations=ops,
            members=[ShareDescribedMember(
                member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch, client_id=m.client_id,
                client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
                assignment=_assignment(m.assigned, s.topic_names)) for m in s.members]))
    return ShareGroupDescribeResponse(groups=out)
