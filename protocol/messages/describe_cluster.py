"""DescribeCluster (key 60): cluster id, controller and brokers, without topic metadata (KIP-700)."""

from __future__ import annotations

from ..schema import BOOL, INT8, INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 60

ENDPOINT_BROKERS = 1
ENDPOINT_CONTROLLERS = 2
# Kafka's "not requested" value for an authorized-operations bitfield
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


@schema
class DescribeClusterRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 0
    include_cluster_authorized_operations: bool = f(BOOL)
    endpoint_type: int = f(INT8, "1+", default=ENDPOINT_BROKERS)
    include_fenced_brokers: bool = f(BOOL, "2+")


@schema
class DescribeClusterBroker(Struct):
    broker_id: int = f(INT32)
    host: str = f(STRING)
    port: int = f(INT32)
    rack: str | None = f(STRING, default=None)
    is_fenced: bool = f(BOOL, "2+")


@schema
class DescribeClusterResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    endpoint_type: int = f(INT8, "1+", default=ENDPOINT_BROKERS)
    cluster_id: str = f(STRING)
    controller_id: int = f(INT32, default=-1)
    brokers: list[DescribeClusterBroker] = f(Array(DescribeClusterBroker))
    cluster_authorized_operations: int = f(INT32, default=AUTHORIZED_OPERATIONS_OMITTED)
