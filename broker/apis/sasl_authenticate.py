"""SaslAuthenticate (36) once a connection is authenticated, or on a listener without SASL: Kafka
answers ILLEGAL_SASL_STATE (there is no re-authentication, KIP-368, here). During authentication
the connection's session answers it (broker/security/session.py)."""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse

from ..context import BrokerContext, ClientInfo, ControllerContext

KEY = 36
ORDERED = False


async def handle(ctx: BrokerContext | ControllerContext, client: ClientInfo, header: RequestHeader,
                 req: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                    error_message="Unexpected SaslAuthenticate: not authenticating", auth_bytes=b"")
