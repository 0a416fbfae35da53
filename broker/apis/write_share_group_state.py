"""WriteShareGroupState (85): a share-partition leader writes the state of a share-partition (its
start offset and in-flight runs) to the share coordinator (broker/apis/share_state_writes.py)."""

from __future__ import annotations

from typing import Any

from protocol.headers import RequestHeader
from protocol.messages.share_group_state import WriteShareGroupStateRequest, WriteShareGroupStateResponse

from ..context import BrokerContext, ClientInfo
from ..share.manager import StoredState
from ..share.partition_state import StateRun
from .share_state_writes import write_each

KEY = 85
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
    return WriteShareGroupStateResponse(results=await write_each(ctx, client, req, _written))


def _written(p: Any) -> tuple[int, StoredState]:
    return p.leader_epoch, StoredState(p.state_epoch, p.start_offset, tuple(
        StateRun(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches))
