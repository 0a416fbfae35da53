"""DescribeCluster (60): the cluster id, the controller and the brokers, as AdminClient.describeCluster
asks for them. The brokers are those the metadata log has registered and not fenced (fenced ones
too, marked, when v2 asks for them); the controller is the quorum leader. Each broker's address
is that of the listener the request came in on (client or inter-broker), as Kafka answers.

Kafka answers a request for the controllers' endpoint (KIP-919) on a broker listener with
MISMATCHED_ENDPOINT_TYPE, and an unknown endpoint type with UNSUPPORTED_ENDPOINT_TYPE; v0 has no
endpoint type, so neither can happen there (Kafka would use INVALID_REQUEST).
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.describe_cluster import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ENDPOINT_BROKERS,
    ENDPOINT_CONTROLLERS,
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)

from ..context import BrokerContext, ClientInfo

KEY = 60
ORDERED = False

# Without an authorizer Kafka grants every operation the cluster resource supports: CREATE, ALTER,
# DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE (AclOperation codes).
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
_ENDPOINT_NAMES = {ENDPOINT_BROKERS: "BROKER", ENDPOINT_CONTROLLERS: "CONTROLLER"}


def _endpoint_error(version: int, endpoint_type: int) -> DescribeClusterResponse | None:
    wanted = _ENDPOINT_NAMES.get(endpoint_type)
    if wanted is None:
        return DescribeClusterResponse(
            error_code=ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message=f"Unsupported endpoint type {endpoint_type}")
    if endpoint_type != ENDPOINT_BROKERS:
        return DescribeClusterResponse(
            error_code=ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            error_message=f"The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
                          f"type {wanted}")
    return None


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DescribeClusterRequest) -> DescribeClusterResponse:
    err = _endpoint_error(header.api_version, req.endpoint_type)
    if err is not None:
        return err
    host, port = client.endpoint  # the listener this request came in on
    brokers = {ctx.node_id: DescribeClusterBroker(broker_id=ctx.node_id, host=host, port=port, rack=ctx.config.rack)}
    controller = ctx.node_id
    if ctx.quorum is not None:
        leader = ctx.quorum.status()[0]
        controller = leader if leader >= 0 else controller
        for b in ctx.topics.image.brokers:
            if b.node_id == ctx.node_id or (b.fenced and not req.include_fenced_brokers):
                continue
            address = b.address_for(client.listener, client.inter_broker)
            if address is None:
                continue
            h, p = address
            brokers[b.node_id] = DescribeClusterBroker(broker_id=b.node_id, host=h, port=p, rack=b.rack,
                                                      is_fenced=b.fenced)
    return DescribeClusterResponse(
        endpoint_type=ENDPOINT_BROKERS,
        cluster_id=ctx.config.cluster_id,
        controller_id=controller,
        brokers=[brokers[n] for n in sorted(brokers)],
        cluster_authorized_operations=(CLUSTER_OPERATIONS if req.include_cluster_authorized_operations
                                       else AUTHORIZED_OPERATIONS_OMITTED),
    )
