"""FindCoordinator (10): which broker coordinates a group or a transactional id.

On a single broker that is this broker; the partition of `__consumer_offsets` or
`__transaction_state` that owns the key is computed the same way a cluster will use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.find_coordinator import Coordinator, FindCoordinatorRequest, FindCoordinatorResponse

if TYPE_CHECKING:
    from ..context import BrokerContext, ClientInfo

KEY = 10
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


def _one(ctx: BrokerContext, client: ClientInfo, key: str, key_type: int) -> Coordinator:
    host, port = client.endpoint  # the listener this request came in on
    if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
        return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.INVALID_REQUEST,
                           error_message=f"unknown key type {key_type}")
    if key_type == KEY_TYPE_GROUP:
        # the group's coordinator leads partition partition_for(key) of __consumer_offsets, which
        # is created on this first need; on one broker that leader is this broker
        if not ctx.groups.sm.active:
            return Coordinator(key=key, node_id=-1, host="", port=-1,
                               error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message="shutting down")
        ctx.groups.ensure_topic()
    else:
        # the leader of __transaction_state partition partition_for(key) coordinates the id; on one
        # broker that is this broker once the topic (created on this first need) is loaded
        ctx.txn.ensure_topic()
        if not ctx.txn.owns(key):
            return Coordinator(key=key, node_id=-1, host="", port=-1,
                               error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message="transaction state not loaded")
    return Coordinator(key=key, node_id=ctx.node_id, host=host, port=port, error_code=0, error_message=None)


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if header.api_version >= 4:
        return FindCoordinatorResponse(coordinators=[_one(ctx, client, k, req.key_type) for k in req.coordinator_keys])
    c = _one(ctx, client, req.key, req.key_type)
    return FindCoordinatorResponse(error_code=c.error_code, error_message=c.error_message, node_id=c.node_id,
                                   host=c.host, port=c.port)
