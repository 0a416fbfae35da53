"""EndQuorumEpoch (key 54): a quorum leader that is shutting down hands over, naming the voters
it prefers as successors (they may start an election at once)."""

from __future__ import annotations

import uuid

from ..schema import INT16, INT32, STRING, UUID, Array, Message, Struct, f, schema
from .begin_quorum_epoch import LeaderEndpoint, QuorumTopicResponse
from .vote import NodeEndpoint

KEY = 54


@schema
class ReplicaInfo(Struct):
    candidate_id: int = f(INT32, "1+")
    candidate_directory_id: uuid.UUID = f(UUID, "1+")


@schema
class EndQuorumEpochPartitionRequest(Struct):
    partition_index: int = f(INT32)
    leader_id: int = f(INT32)
    leader_epoch: int = f(INT32)
    preferred_successors: list[int] = f(Array(INT32), "0")
    preferred_candidates: list[ReplicaInfo] = f(Array(ReplicaInfo), "1+")


@schema
class EndQuorumEpochTopicRequest(Struct):
    topic_name: str = f(STRING)
    partitions: list[EndQuorumEpochPartitionRequest] = f(Array(EndQuorumEpochPartitionRequest))


@schema
class EndQuorumEpochRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 1)
    FLEXIBLE = 1
    cluster_id: str | None = f(STRING, default=None)
    topics: list[EndQuorumEpochTopicRequest] = f(Array(EndQuorumEpochTopicRequest))
    leader_endpoints: list[LeaderEndpoint] = f(Array(LeaderEndpoint), "1+")


@schema
class EndQuorumEpochResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 1)
    FLEXIBLE = 1
    error_code: int = f(INT16)
    topics: list[QuorumTopicResponse] = f(Array(QuorumTopicResponse))
    node_endpoints: list[NodeEndpoint] = f(Array(NodeEndpoint), "1+", tag=0, tagged="1+")
