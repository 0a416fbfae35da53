"""ShareFetch (key 78) and ShareAcknowledge (key 79): a share-group member acquires records of a
partition (each acquired range comes with its delivery count and a lock of AcquisitionLockTimeoutMs)
and acknowledges them: ACCEPT, RELEASE (deliver again) or REJECT (never again), in a ShareFetch or on
their own. Both run in a share session (epoch 0 opens, -1 closes, each request the next epoch).

Kafka's ShareFetch*/ShareAcknowledge*.json at version 1, Kafka 4.1's stable version (0 was 4.0's early
access; 2 adds acquire modes and RENEW, KIP-1206/1222) and the only one librdkafka 2.16 sends."""

from __future__ import annotations

import uuid

from ..schema import INT8, INT16, INT32, INT64, RECORDS, STRING, UUID, Array, Message, Struct, f, schema

FETCH_KEY = 78
ACKNOWLEDGE_KEY = 79

# AcknowledgeTypes: 0 GAP (the offset holds no record), 1 ACCEPT, 2 RELEASE, 3 REJECT
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3


@schema
class AcknowledgementBatch(Struct):
    first_offset: int = f(INT64)
    last_offset: int = f(INT64)
    acknowledge_types: list[int] = f(Array(INT8))


@schema
class ShareFetchPartition(Struct):
    partition_index: int = f(INT32)
    acknowledgement_batches: list[AcknowledgementBatch] = f(Array(AcknowledgementBatch))


@schema
class ShareFetchTopic(Struct):
    topic_id: uuid.UUID = f(UUID)
    partitions: list[ShareFetchPartition] = f(Array(ShareFetchPartition))


@schema
class ForgottenTopic(Struct):
    topic_id: uuid.UUID = f(UUID)
    partitions: list[int] = f(Array(INT32))


@schema
class ShareFetchRequest(Message):
    API_KEY = FETCH_KEY
    VERSIONS = (1, 1)
    FLEXIBLE = 0
    group_id: str | None = f(STRING, default=None)
    member_id: str | None = f(STRING, default=None)
    share_session_epoch: int = f(INT32)
    max_wait_ms: int = f(INT32)
    min_bytes: int = f(INT32)
    max_bytes: int = f(INT32, default=0x7FFFFFFF)
    max_records: int = f(INT32)
    batch_size: int = f(INT32)
    topics: list[ShareFetchTopic] = f(Array(ShareFetchTopic))
    forgotten_topics_data: list[ForgottenTopic] = f(Array(ForgottenTopic))


@schema
class LeaderIdAndEpoch(Struct):
    leader_id: int = f(INT32, default=-1)
    leader_epoch: int = f(INT32, default=-1)


@schema
class AcquiredRecords(Struct):
    first_offset: int = f(INT64)
    last_offset: int = f(INT64)
    delivery_count: int = f(INT16)


@schema
class ShareFetchPartitionData(Struct):
    partition_index: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    acknowledge_error_code: int = f(INT16)
    acknowledge_error_message: str | None = f(STRING, default=None)
    current_leader: LeaderIdAndEpoch = f(LeaderIdAndEpoch)
    records: bytes | memoryview | None = f(RECORDS, default=b"")
    acquired_records: list[AcquiredRecords] = f(Array(AcquiredRecords))


@schema
class ShareFetchTopicResponse(Struct):
    topic_id: uuid.UUID = f(UUID)
    partitions: list[ShareFetchPartitionData] = f(Array(ShareFetchPartitionData))


@schema
class NodeEndpoint(Struct):
    node_id: int = f(INT32)
    host: str = f(STRING)
    port: int = f(INT32)
    rack: str | None = f(STRING, default=None)


@schema
class ShareFetchResponse(Message):
    API_KEY = FETCH_KEY
    VERSIONS = (1, 1)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    acquisition_lock_timeout_ms: int = f(INT32)
    responses: list[ShareFetchTopicResponse] = f(Array(ShareFetchTopicResponse))
    node_endpoints: list[NodeEndpoint] = f(Array(NodeEndpoint))


@schema
class ShareAcknowledgeRequest(Message):
    API_KEY = ACKNOWLEDGE_KEY
    VERSIONS = (1, 1)
    FLEXIBLE = 0
    group_id: str | None = f(STRING, default=None)
    member_id: str | None = f(STRING, default=None)
    share_session_epoch: int = f(INT32)
    topics: list[ShareFetchTopic] = f(Array(ShareFetchTopic))


@schema
class ShareAcknowledgePartitionData(Struct):
    partition_index: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    current_leader: LeaderIdAndEpoch = f(LeaderIdAndEpoch)


@schema
class ShareAcknowledgeTopicResponse(Struct):
    topic_id: uuid.UUID = f(UUID)
    partitions: list[ShareAcknowledgePartitionData] = f(Array(ShareAcknowledgePartitionData))


@schema
class ShareAcknowledgeResponse(Message):
    API_KEY = ACKNOWLEDGE_KEY
    VERSIONS = (1, 1)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    responses: list[ShareAcknowledgeTopicResponse] = f(Array(ShareAcknowledgeTopicResponse))
    node_endpoints: list[NodeEndpoint] = f(Array(NodeEndpoint))
