"""SaslHandshake (17) once a connection is authenticated, or on a listener without SASL: Kafka
answers ILLEGAL_SASL_STATE. During authentication the connection's session answers it
(broker/security/session.py), before any handler runs."""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.sasl import SaslHandshakeRequest, SaslHandshakeResponse

from ..context import BrokerContext, ClientInfo, ControllerContext

KEY = 17
ORDERED = False


async def handle(ctx: BrokerContext | ControllerContext, client: ClientInfo, header: RequestHeader,
                 req: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
