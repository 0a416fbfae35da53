"""FetchSnapshot (key 59): a quorum follower behind the leader's log start copies the leader's
metadata snapshot, in chunks from `position`."""

from __future__ import annotations

import uuid

from ..schema import INT16, INT32, INT64, RECORDS, STRING, UUID, Array, Message, Struct, f, schema
from .vote import NodeEndpoint

KEY = 59


@schema
class SnapshotId(Struct):
    end_offset: int = f(INT64)
    epoch: int = f(INT32)


@schema
class PartitionSnapshotRequest(Struct):
    partition: int = f(INT32)
    current_leader_epoch: int = f(INT32)
    snapshot_id: SnapshotId = f(SnapshotId)
    position: int = f(INT64)
    replica_directory_id: uuid.UUID = f(UUID, "1+", tag=0, tagged="1+")


@schema
class TopicSnapshotRequest(Struct):
    name: str = f(STRING)
    partitions: list[PartitionSnapshotRequest] = f(Array(PartitionSnapshotRequest))


@schema
class FetchSnapshotRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 1)
    FLEXIBLE = 0
    cluster_id: str | None = f(STRING, tag=0, tagged="0+", default=None)
    replica_id: int = f(INT32, default=-1)
    max_bytes: int = f(INT32, default=0x7FFFFFFF)
    topics: list[TopicSnapshotRequest] = f(Array(TopicSnapshotRequest))


@schema
class LeaderIdAndEpoch(Struct):
    leader_id: int = f(INT32)
    leader_epoch: int = f(INT32)


@schema
class PartitionSnapshotResponse(Struct):
    index: int = f(INT32)
    error_code: int = f(INT16)
    snapshot_id: SnapshotId = f(SnapshotId)
    current_leader: LeaderIdAndEpoch = f(LeaderIdAndEpoch, tag=0, tagged="0+")
    size: int = f(INT64)
    position: int = f(INT64)
    unaligned_records: bytes | None = f(RECORDS)


@schema
class TopicSnapshotResponse(Struct):
    name: str = f(STRING)
    partitions: list[PartitionSnapshotResponse] = f(Array(PartitionSnapshotResponse))


@schema
class FetchSnapshotResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 1)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    topics: list[TopicSnapshotResponse] = f(Array(TopicSnapshotResponse))
    node_endpoints: list[NodeEndpoint] = f(Array(NodeEndpoint), "1+", tag=0, tagged="1+")
