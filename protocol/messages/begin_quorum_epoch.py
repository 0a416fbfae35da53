"""BeginQuorumEpoch (key 53): a newly elected quorum leader tells the voters who leads which epoch."""

from __future__ import annotations

import uuid

from ..schema import INT16, INT32, STRING, UINT16, UUID, Array, Message, Struct, f, schema
from .vote import NodeEndpoint

KEY = 53


@schema
class BeginQuorumEpochPartitionRequest(Struct):
    partition_index: int = f(INT32)
    voter_directory_id: uuid.UUID = f(UUID, "1+")
    leader_id: int = f(INT32)
    leader_epoch: int = f(INT32)


@schema
class BeginQuorumEpochTopicRequest(Struct):
    topic_name: str = f(STRING)
    partitions: list[BeginQuorumEpochPartitionRequest] = f(Array(BeginQuorumEpochPartitionRequest))


@schema
class LeaderEndpoint(Struct):
    name: str = f(STRING, "1+")
    host: str = f(STRING, "1+")
    port: int = f(UINT16, "1+")


@schema
class BeginQuorumEpochRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 1)
    FLEXIBLE = 1
    cluster_id: str | None = f(STRING, default=None)
    voter_id: int = f(INT32, "1+", default=-1)
    topics: list[BeginQuorumEpochTopicRequest] = f(Array(BeginQuorumEpochTopicRequest))
    leader_endpoints: list[LeaderEndpoint] = f(Array(LeaderEndpoint), "1+")


@schema
class QuorumPartitionResponse(Struct):
    partition_index: int = f(INT32)
    error_code: int = f(INT16)
    leader_id: int = f(INT32)
    leader_epoch: int = f(INT32)


@schema
class QuorumTopicResponse(Struct):
    topic_name: str = f(STRING)
    partitions: list[QuorumPartitionResponse] = f(Array(QuorumPartitionResponse))


@schema
class BeginQuorumEpochResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 1)
    FLEXIBLE = 1
    error_code: int = f(INT16)
    topics: list[QuorumTopicResponse] = f(Array(QuorumTopicResponse))
    node_endpoints: list[NodeEndpoint] = f(Array(NodeEndpoint), "1+", tag=0, tagged="1+")
