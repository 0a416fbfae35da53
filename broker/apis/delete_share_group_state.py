"""DeleteShareGroupState (86): the share coordinator forgets share-partitions (a tombstone each;
broker/apis/share_state_writes.py)."""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.share_group_state import DeleteShareGroupStateRequest, DeleteShareGroupStateResponse

from ..context import BrokerContext, ClientInfo
from .share_state_writes import write_each

KEY = 86
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
    return DeleteShareGroupStateResponse(results=await write_each(ctx, client, req, lambda p: (-1, None)))
