"""The share coordinator's inter-broker APIs (KIP-932): a share-partition leader initializes, reads,
writes and deletes the durable state of its share-partitions, which the share coordinator keeps in
`__share_group_state`. InitializeShareGroupState (83), ReadShareGroupState (84),
WriteShareGroupState (85), DeleteShareGroupState (86), each version 0 as in Kafka 4.1's JSON.

A state batch is a run of offsets in one delivery state (0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED)
with one delivery count; offsets below the start offset are done, offsets past the last batch have
never been delivered."""

from __future__ import annotations

import uuid

from ..schema import INT8, INT16, INT32, INT64, STRING, UUID, Array, Message, Struct, f, schema

INITIALIZE_KEY, READ_KEY, WRITE_KEY, DELETE_KEY = 83, 84, 85, 86


@schema
class StateBatch(Struct):
    first_offset: int = f(INT64)
    last_offset: int = f(INT64)
    delivery_state: int = f(INT8)
    delivery_count: int = f(INT16)


# ---- InitializeShareGroupState (83) -------------------------------------------------------------
@schema
class InitializePartition(Struct):
    partition: int = f(INT32)
    state_epoch: int = f(INT32)
    start_offset: int = f(INT64)


@schema
class InitializeTopic(Struct):
    topic_id: uuid.UUID = f(UUID)
    partitions: list[InitializePartition] = f(Array(InitializePartition))


@schema
class InitializeShareGroupStateRequest(Message):
    API_KEY = INITIALIZE_KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    group_id: str = f(STRING)
    topics: list[InitializeTopic] = f(Array(InitializeTopic))


@schema
class PartitionResult(Struct):
    partition: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)


@schema
class TopicResult(Struct):
    topic_id: uuid.UUID = f(UUID)
    partitions: list[PartitionResult] = f(Array(PartitionResult))


@schema
class InitializeShareGroupStateResponse(Message):
    API_KEY = INITIALIZE_KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    results: list[TopicResult] = f(Array(TopicResult))


# ---- ReadShareGroupState (84) -------------------------------------------------------------------
@schema
class ReadPartition(Struct):
    partition: int = f(INT32)
    leader_epoch: int = f(INT32)


@schema
class ReadTopic(Struct):
    topic_id: uuid.UUID = f(UUID)
    partitions: list[ReadPartition] = f(Array(ReadPartition))


@schema
class ReadShareGroupStateRequest(Message):
    API_KEY = READ_KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    group_id: str = f(STRING)
    topics: list[ReadTopic] = f(Array(ReadTopic))


@schema
class ReadPartitionResult(Struct):
    partition: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    state_epoch: int = f(INT32)
    start_offset: int = f(INT64)
    state_batches: list[StateBatch] = f(Array(StateBatch))


@schema
class ReadTopicResult(Struct):
    topic_id: uuid.UUID = f(UUID)
    partitions: list[ReadPartitionResult] = f(Array(ReadPartitionResult))


@schema
class ReadShareGroupStateResponse(Message):
    API_KEY = READ_KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    results: list[ReadTopicResult] = f(Array(ReadTopicResult))


# ---- WriteShareGroupState (85) ------------------------------------------------------------------
@schema
class WritePartition(Struct):
    partition: int = f(INT32)
    state_epoch: int = f(INT32)
    leader_epoch: int = f(INT32)
    start_offset: int = f(INT64)
    state_batches: list[StateBatch] = f(Array(StateBatch))


@schema
class WriteTopic(Struct):
    topic_id: uuid.UUID = f(UUID)
    partitions: list[WritePartition] = f(Array(WritePartition))


@schema
class WriteShareGroupStateRequest(Message):
    API_KEY = WRITE_KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    group_id: str = f(STRING)
    topics: list[WriteTopic] = f(Array(WriteTopic))


@schema
class WriteShareGroupStateResponse(Message):
    API_KEY = WRITE_KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    results: list[TopicResult] = f(Array(TopicResult))


# ---- DeleteShareGroupState (86) -----------------------------------------------------------------
@schema
class DeletePartition(Struct):
    partition: int = f(INT32)


@schema
class DeleteTopic(Struct):
    topic_id: uuid.UUID = f(UUID)
    partitions: list[DeletePartition] = f(Array(DeletePartition))


@schema
class DeleteShareGroupStateRequest(Message):
    API_KEY = DELETE_KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    group_id: str = f(STRING)
    topics: list[DeleteTopic] = f(Array(DeleteTopic))


@schema
class DeleteShareGroupStateResponse(Message):
    API_KEY = DELETE_KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    results: list[TopicResult] = f(Array(TopicResult))
