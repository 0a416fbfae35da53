"""DescribeGroups (15): state, protocol and members of groups (what `ketch group describe` shows).

An unknown group is not an error here: Kafka answers it as an empty group in state Dead.
"""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)

from ..context import BrokerContext, ClientInfo
from ..group.state import GROUP_OPERATIONS

KEY = 15
ORDERED = False
NOT_REQUESTED = -2147483648


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    await ctx.groups.ensure_topic()
    ops = GROUP_OPERATIONS if header.api_version >= 3 and req.include_authorized_operations else NOT_REQUESTED
    out = []
    for gid in req.groups:
        err, s = ctx.groups.describe_group(gid)
        out.append(DescribedGroup(
            error_code=err, group_id=gid, group_state=s.state, protocol_type=s.protocol_type,
            protocol_data=s.protocol_name, authorized_operations=ops,
            members=[DescribedGroupMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                          client_id=m.client_id, client_host=m.client_host,
                                          member_metadata=m.metadata, member_assignment=m.assignment)
                     for m in s.members],
        ))
    return DescribeGroupsResponse(groups=out)
