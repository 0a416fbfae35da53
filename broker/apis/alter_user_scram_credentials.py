"""AlterUserScramCredentials (51): set or delete users' SCRAM credentials, decided by the active
controller and written to the metadata log as UserScramCredentialRecord /
RemoveUserScramCredentialRecord (broker/controller/scram.py), so every broker can log the users in
and the credentials outlive a controller failover. A broker forwards the request unchanged to the
quorum leader's controller listener (broker/forwarding.py), as Kafka's brokers do."""

from __future__ import annotations

from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages.user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)

from ..context import BrokerContext, ClientInfo, ControllerContext
from ..controller.scram import Upsertion
from ..controller.shell import ControllerShell

KEY = 51
ORDERED = False


async def decide(shell: ControllerShell, req: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    deletions = [(d.name, d.mechanism) for d in req.deletions]
    upsertions = [Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
                  for u in req.upsertions]
    users = list(dict.fromkeys([d[0] for d in deletions] + [u.user for u in upsertions]))
    try:
        results = await shell.alter_scram(deletions, upsertions)
    except KafkaError as e:  # NOT_CONTROLLER: the client retries
        return AlterUserScramCredentialsResponse(results=[AlterUserScramCredentialsResult(
            user=u, error_code=e.code, error_message=e.message) for u in users])
    return AlterUserScramCredentialsResponse(results=[AlterUserScramCredentialsResult(
        user=u, error_code=results[u][0], error_message=results[u][1]) for u in users])


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    """On the node that leads the quorum (or when no leader is known); elsewhere `to_controller`
    forwards it (broker/apis/__init__.py)."""
    if ctx.controller_client is None:
        return AlterUserScramCredentialsResponse(results=[AlterUserScramCredentialsResult(
            user=u, error_code=ErrorCode.NOT_CONTROLLER)
            for u in dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])])
    return await decide(ctx.controller_client.shell, req)


async def on_controller(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                        req: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    return await decide(ctx.shell, req)
