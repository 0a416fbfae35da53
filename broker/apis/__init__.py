"""Request handlers, one module per Kafka API (named after it), like franz-go's kfake, and the
table each listener serves.

Every handler is `async def handle(ctx, client, header, request) -> response | None` (the
context.Handler type): `ctx` is the narrow BrokerContext (ControllerContext on the controller
listener), never the server. None means "send nothing" (Produce with acks=0). Each module says
whether its requests run in request order (`ORDERED`, broker/connection.py says why).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages import describe_quorum as dq
from protocol.messages import partition_reassignments as pr
from protocol.messages import user_scram_credentials as usc
from protocol.schema import Message
from protocol.supported import CONTROLLER_SUPPORTED, SUPPORTED

from ..context import BrokerContext, ClientInfo, ControllerHandler, Handler
from ..wire import WireError
from . import (
    alter_user_scram_credentials,
    api_versions,
    controller_acls,
    controller_topics,
    partition_reassignments,
    quorum,
    sasl_authenticate,
    sasl_handshake,
)

log = structlog.get_logger()


def to_controller(local: Handler) -> Handler:
    """A client-listener handler that forwards to the quorum leader; `local` answers on the leader,
    and wherever the leader is unknown or cannot be reached (for DescribeQuorum:
    NOT_LEADER_OR_FOLLOWER naming the leader this node knows). It is `local`'s, module included
    (whose ORDERED holds for it)."""

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


def cluster_checked(handler: Handler, op: AclOperation, refused: Callable[[Any], Message]) -> Handler:
    """`handler` behind Kafka's check of `op` on the cluster (`refused(request)` answers without
    it), made before anything is forwarded: the controller listener does not know who asked."""

    @functools.wraps(handler)
    async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader, req: Any) -> Any:
        if not ctx.authorizer.allows(client, op, ResourceType.CLUSTER, CLUSTER_NAME):
            return refused(req)
        return await handler(ctx, client, header, req)

    return handle


def _scram_refused(req: Any) -> Message:
    users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    return usc.AlterUserScramCredentialsResponse(results=[usc.AlterUserScramCredentialsResult(
        user=u, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="Cluster authorization failed.")
        for u in users])


# Every module named for a Kafka API declares its KEY, its `handle` and whether it is ORDERED.
_MODULES = [importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(__path__)]
HANDLERS: dict[int, Handler] = {m.KEY: m.handle for m in _MODULES if hasattr(m, "KEY")}
# Forwarded to the quorum leader's controller listener, as Kafka's brokers forward them.
HANDLERS[55] = cluster_checked(to_controller(quorum.describe_quorum), AclOperation.DESCRIBE,
                               lambda _: dq.DescribeQuorumResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
HANDLERS[46] = cluster_checked(to_controller(partition_reassignments.list_reassignments), AclOperation.DESCRIBE,
                               lambda _: pr.ListPartitionReassignmentsResponse(
                                     error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                     error_message="Cluster authorization failed."))
HANDLERS[51] = cluster_checked(to_controller(alter_user_scram_credentials.handle), AclOperation.ALTER, _scram_refused)

# The controller listener: the metadata quorum's protocol (KRaft), and nothing a client uses.
CONTROLLER_HANDLERS: dict[int, ControllerHandler] = {
    1: quorum.metadata_fetch, 18: api_versions.handle, 19: controller_topics.create_topics,
    20: controller_topics.delete_topics, 33: controller_topics.alter_configs, 37: controller_topics.create_partitions,
    43: controller_topics.elect_leaders, 45: partition_reassignments.on_controller,
    46: partition_reassignments.list_reassignments,
    56: controller_topics.alter_partition,
    52: quorum.vote, 53: quorum.begin_quorum_epoch,
    54: quorum.end_quorum_epoch, 55: quorum.describe_quorum, 59: quorum.fetch_snapshot,
    62: quorum.broker_registration, 63: quorum.broker_heartbeat, 67: quorum.allocate_producer_ids,
    73: quorum.assign_replicas_to_dirs, 30: controller_acls.create_acls, 31: controller_acls.delete_acls,
    17: sasl_handshake.handle, 36: sasl_authenticate.handle, 51: alter_user_scram_credentials.on_controller,
}


@dataclass(frozen=True, slots=True)
class ApiTable:
    """What one listener serves: a handler and the version range per API key, and the keys whose
    requests run in request order (their modules' ORDERED)."""

    handlers: Mapping[int, Any]  # a Handler, or a ControllerHandler on the controller listener
    supported: dict[int, tuple[int, int]]
    ordered: frozenset[int]

    @classmethod
    def of(cls, handlers: Mapping[int, Any], supported: dict[int, tuple[int, int]]) -> ApiTable:
        return cls(handlers, supported, frozenset(k for k, h in handlers.items() if sys.modules[h.__module__].ORDERED))


CLIENT_APIS = ApiTable.of(HANDLERS, SUPPORTED)  # the client and inter-broker listeners
CONTROLLER_APIS = ApiTable.of(CONTROLLER_HANDLERS, CONTROLLER_SUPPORTED)
