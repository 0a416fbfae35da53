"""Client-listener handlers for the admin requests Kafka's brokers forward to the active controller
(broker/forwarding.py): DescribeQuorum and ListPartitionReassignments. The latter is answered from
the quorum leader's image, not this broker's: a broker whose image lags (a slow fetch of the metadata
log) would list a reassignment as still running, or miss one just started.)"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import structlog

from protocol.headers import RequestHeader

from ..wire import WireError

if TYPE_CHECKING:
    from ..context import BrokerContext, ClientInfo, Handler

log = structlog.get_logger()


def to_controller(local: Handler) -> Handler:
    """`local` answers on the quorum leader, and wherever the leader is unknown or cannot be
    reached (for DescribeQuorum: NOT_LEADER_OR_FOLLOWER naming the leader this node knows). The
    wrapper is `local`'s (module included: its ORDERED holds for it)."""

    @functools.wraps(local)
    async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader, req: Any) -> Any:
        forwarder = ctx.forwarder
        node = forwarder.leader_elsewhere() if forwarder is not None else None
        if forwarder is not None and node is not None:
            try:
                return await forwarder.forward(node, req, header.api_version)
            except (WireError, OSError) as e:
                log.info("forwarding to the quorum leader failed; answered here", api_key=header.api_key,
                         leader=node, error=str(e))
        return await local(ctx, client, header, req)

    return handle
