"""AlterPartition (key 56): a partition leader asks the active controller to change its ISR,
naming the leader epoch and partition epoch it saw (the controller refuses stale ones).
Topics by name in v0-1, by id from v2; v3 carries each new member's broker epoch (KIP-903)."""

from __future__ import annotations

import uuid

from ..schema import INT8, INT16, INT32, INT64, STRING, UUID, Array, Message, Struct, f, schema

KEY = 56


@schema
class BrokerState(Struct):
    broker_id: int = f(INT32, "3+")
    broker_epoch: int = f(INT64, "3+", default=-1)


@schema
class PartitionData(Struct):
    partition_index: int = f(INT32)
    leader_epoch: int = f(INT32)
    new_isr: list[int] = f(Array(INT32), "0-2")
    new_isr_with_epochs: list[BrokerState] = f(Array(BrokerState), "3+")
    leader_recovery_state: int = f(INT8, "1+")
    partition_epoch: int = f(INT32)


@schema
class TopicData(Struct):
    topic_name: str = f(STRING, "0-1", default="")
    topic_id: uuid.UUID = f(UUID, "2+")
    partitions: list[PartitionData] = f(Array(PartitionData))


@schema
class AlterPartitionRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 3)
    FLEXIBLE = 0
    broker_id: int = f(INT32)
    broker_epoch: int = f(INT64, default=-1)
    topics: list[TopicData] = f(Array(TopicData))


@schema
class PartitionResult(Struct):
    partition_index: int = f(INT32)
    error_code: int = f(INT16)
    leader_id: int = f(INT32)
    leader_epoch: int = f(INT32)
    isr: list[int] = f(Array(INT32))
    leader_recovery_state: int = f(INT8, "1+")
    partition_epoch: int = f(INT32)


@schema
class TopicResult(Struct):
    topic_name: str = f(STRING, "0-1", default="")
    topic_id: uuid.UUID = f(UUID, "2+")
    partitions: list[PartitionResult] = f(Array(PartitionResult))


@schema
class AlterPartitionResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 3)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    topics: list[TopicResult] = f(Array(TopicResult))
