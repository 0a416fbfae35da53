"""InitializeShareGroupState (83): the state of a new share-partition (its start offset, nothing in
flight) is written to the share coordinator (broker/apis/share_state_writes.py)."""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.share_group_state import (
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
)

from ..context import BrokerContext, ClientInfo
from ..share.manager import StoredState
from .share_state_writes import write_each

KEY = 83
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: InitializeShareGroupStateRequest) -> InitializeShareGroupStateResponse:
    return InitializeShareGroupStateResponse(results=await write_each(
        ctx, client, req, lambda p: (-1, StoredState(p.state_epoch, p.start_offset, ()))))
