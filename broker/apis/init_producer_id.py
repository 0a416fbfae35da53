"""InitProducerId (22): a fresh producer id for idempotent producers.

Transactional ids go to the transaction coordinator (design.md §5), which is not built yet:
until then such a request is answered COORDINATOR_NOT_AVAILABLE, which clients retry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

if TYPE_CHECKING:
    from ..server import BrokerServer, ClientInfo

KEY = 22


async def handle(server: BrokerServer, client: ClientInfo, header: RequestHeader,
                 req: InitProducerIdRequest) -> InitProducerIdResponse:
    if req.transactional_id is not None:
        return InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1,
                                      producer_epoch=-1)
    return InitProducerIdResponse(error_code=0, producer_id=server.producer_ids.allocate(), producer_epoch=0)
