"""ElectLeaders (43): preferred or unclean leader election (kafka-leader-election), decided by
the active controller — here, or forwarded to it — and answered per partition: elected,
ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE or
UNKNOWN_TOPIC_OR_PARTITION. v0 asks for the preferred leader."""

from __future__ import annotations

from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages.elect_leaders import UNCLEAN, ElectLeadersRequest, ElectLeadersResponse

from ..context import BrokerContext, ClientInfo
from .controller_topics import election_response, wanted_partitions

KEY = 43
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: ElectLeadersRequest) -> ElectLeadersResponse:
    unclean = header.api_version >= 1 and req.election_type == UNCLEAN
    elector = ctx.controller_client
    if elector is None:
        return ElectLeadersResponse(error_code=ErrorCode.NOT_CONTROLLER)
    try:
        outcome = await elector.elect_leaders(wanted_partitions(req), unclean)
    except KafkaError as e:
        return ElectLeadersResponse(error_code=e.code)
    return election_response(outcome)
