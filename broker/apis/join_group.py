"""JoinGroup (11): a member joins (or rejoins) a consumer group; answered when the join phase ends.

The request is parked in the group coordinator until every member has rejoined or the rebalance
timeout passes, so this handler may wait minutes; other requests on the connection still run.
"""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse, JoinGroupResponseMember

from ..context import BrokerContext, ClientInfo
from ..group.model import JoinRequest

KEY = 11
ORDERED = False


def client_host(client: ClientInfo) -> str:
    """As Kafka shows it (InetAddress.toString): '/' and the address, without the port."""
    return "/" + client.peer.rsplit(":", 1)[0]


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: JoinGroupRequest) -> JoinGroupResponse:
    v = header.api_version
    result = await ctx.groups.join(JoinRequest(
        group_id=req.group_id,
        member_id=req.member_id,
        group_instance_id=req.group_instance_id if v >= 5 else None,
        client_id=header.client_id or "",
        client_host=client_host(client),
        session_timeout_ms=req.session_timeout_ms,
        # v0 has no rebalance timeout: the session timeout served for both
        rebalance_timeout_ms=req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms,
        protocol_type=req.protocol_type,
        protocols=[(p.name, p.metadata) for p in req.protocols],
        require_known_member_id=v >= 4 and req.group_instance_id is None,
    ))
    protocol_name = result.protocol_name
    if protocol_name is None and v < 7:
        protocol_name = ""  # not nullable before v7
    return JoinGroupResponse(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                         metadata=m.metadata) for m in result.members],
    )
