"""Vote (key 52): a candidate asks the quorum's voters for their vote; v2 carries KIP-996's
pre-vote flag (a vote asked without bumping the epoch)."""

from __future__ import annotations

import uuid

from ..schema import BOOL, INT16, INT32, INT64, STRING, UINT16, UUID, Array, Message, Struct, f, schema

KEY = 52


@schema
class VotePartitionRequest(Struct):
    partition_index: int = f(INT32)
    candidate_epoch: int = f(INT32)
    candidate_id: int = f(INT32)
    candidate_directory_id: uuid.UUID = f(UUID, "1+")
    voter_directory_id: uuid.UUID = f(UUID, "1+")
    last_offset_epoch: int = f(INT32)
    last_offset: int = f(INT64)
    pre_vote: bool = f(BOOL, "2+")


@schema
class VoteTopicRequest(Struct):
    topic_name: str = f(STRING)
    partitions: list[VotePartitionRequest] = f(Array(VotePartitionRequest))


@schema
class VoteRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 0
    cluster_id: str | None = f(STRING, default=None)
    voter_id: int = f(INT32, "1+", default=-1)
    topics: list[VoteTopicRequest] = f(Array(VoteTopicRequest))


@schema
class VotePartitionResponse(Struct):
    partition_index: int = f(INT32)
    error_code: int = f(INT16)
    leader_id: int = f(INT32)
    leader_epoch: int = f(INT32)
    vote_granted: bool = f(BOOL)


@schema
class VoteTopicResponse(Struct):
    topic_name: str = f(STRING)
    partitions: list[VotePartitionResponse] = f(Array(VotePartitionResponse))


@schema
class NodeEndpoint(Struct):
    node_id: int = f(INT32, "1+")
    host: str = f(STRING, "1+")
    port: int = f(UINT16, "1+")


@schema
class VoteResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 0
    error_code: int = f(INT16)
    topics: list[VoteTopicResponse] = f(Array(VoteTopicResponse))
    node_endpoints: list[NodeEndpoint] = f(Array(NodeEndpoint), "1+", tag=0, tagged="1+")
