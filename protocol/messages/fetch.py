"""Fetch (key 1): consumers and follower replicas read record batches from partition logs."""

from __future__ import annotations

import uuid

from ..schema import INT8, INT16, INT32, INT64, RECORDS, STRING, UUID, Array, Message, Struct, f, schema

KEY = 1


@schema
class ReplicaState(Struct):
    replica_id: int = f(INT32, "15+", default=-1)
    replica_epoch: int = f(INT64, "15+", default=-1)


@schema
class FetchPartition(Struct):
    partition: int = f(INT32)
    current_leader_epoch: int = f(INT32, "9+", default=-1)
    fetch_offset: int = f(INT64)
    last_fetched_epoch: int = f(INT32, "12+", default=-1)
    log_start_offset: int = f(INT64, "5+", default=-1)
    partition_max_bytes: int = f(INT32)
    replica_directory_id: uuid.UUID = f(UUID, "17+", tag=0)


@schema
class FetchTopic(Struct):
    topic: str = f(STRING, "0-12")
    topic_id: uuid.UUID = f(UUID, "13+")
    partitions: list[FetchPartition] = f(Array(FetchPartition))


@schema
class ForgottenTopic(Struct):
    topic: str = f(STRING, "7-12")
    topic_id: uuid.UUID = f(UUID, "13+")
    partitions: list[int] = f(Array(INT32), "7+")


@schema
class FetchRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 17)
    FLEXIBLE = 12
    cluster_id: str | None = f(STRING, "12+", tag=0, default=None)
    replica_id: int = f(INT32, "0-14", default=-1)
    replica_state: ReplicaState = f(ReplicaState, "15+", tag=1)
    max_wait_ms: int = f(INT32)
    min_bytes: int = f(INT32)
    max_bytes: int = f(INT32, "3+", default=0x7FFFFFFF)
    isolation_level: int = f(INT8, "4+", default=0)
    session_id: int = f(INT32, "7+", default=0)
    session_epoch: int = f(INT32, "7+", default=-1)
    topics: list[FetchTopic] = f(Array(FetchTopic))
    forgotten_topics_data: list[ForgottenTopic] = f(Array(ForgottenTopic), "7+")
    rack_id: str = f(STRING, "11+", default="")


@schema
class EpochEndOffset(Struct):
    epoch: int = f(INT32, "12+", default=-1)
    end_offset: int = f(INT64, "12+", default=-1)


@schema
class LeaderIdAndEpoch(Struct):
    leader_id: int = f(INT32, "12+", default=-1)
    leader_epoch: int = f(INT32, "12+", default=-1)


@schema
class SnapshotId(Struct):
    end_offset: int = f(INT64, default=-1)
    epoch: int = f(INT32, default=-1)


@schema
class AbortedTransaction(Struct):
    producer_id: int = f(INT64, "4+")
    first_offset: int = f(INT64, "4+")


@schema
class PartitionData(Struct):
    partition_index: int = f(INT32)
    error_code: int = f(INT16)
    high_watermark: int = f(INT64)
    last_stable_offset: int = f(INT64, "4+", default=-1)
    log_start_offset: int = f(INT64, "5+", default=-1)
    diverging_epoch: EpochEndOffset = f(EpochEndOffset, "12+", tag=0)
    current_leader: LeaderIdAndEpoch = f(LeaderIdAndEpoch, "12+", tag=1)
    snapshot_id: SnapshotId = f(SnapshotId, "12+", tag=2)
    aborted_transactions: list[AbortedTransaction] | None = f(Array(AbortedTransaction), "4+")
    preferred_read_replica: int = f(INT32, "11+", default=-1)
    records: bytes | memoryview | None = f(RECORDS)


@schema
class FetchableTopicResponse(Struct):
    topic: str = f(STRING, "0-12")
    topic_id: uuid.UUID = f(UUID, "13+")
    partitions: list[PartitionData] = f(Array(PartitionData))


@schema
class NodeEndpoint(Struct):
    node_id: int = f(INT32, "16+")
    host: str = f(STRING, "16+")
    port: int = f(INT32, "16+")
    rack: str | None = f(STRING, "16+", default=None)


@schema
class FetchResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 17)
    FLEXIBLE = 12
    throttle_time_ms: int = f(INT32, "1+")
    error_code: int = f(INT16, "7+")
    session_id: int = f(INT32, "7+", default=0)
    responses: list[FetchableTopicResponse] = f(Array(FetchableTopicResponse))
    node_endpoints: list[NodeEndpoint] = f(Array(NodeEndpoint), "16+", tag=0)
