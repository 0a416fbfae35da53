"""GetReplicaLogInfo (key 93, KIP-966's unclean recovery): the active controller asks a broker how
far its replicas of some partitions go — the last leader epoch written and the log end — to
choose which replica of a partition that no replica is known to hold whole may lead
(broker/controller/recovery.py). Kafka's broker listener; Ketch serves it on the inter-broker
listener only. v0, flexible."""

from __future__ import annotations

import uuid

from ..schema import BOOL, INT16, INT32, INT64, UUID, Array, Message, Struct, f, schema

KEY = 93
MAX_PARTITIONS = 1000  # an answer holds at most this many (Truncated)


@schema
class TopicPartitions(Struct):
    topic_id: uuid.UUID = f(UUID)
    partitions: list[int] = f(Array(INT32))


@schema
class GetReplicaLogInfoRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    topic_partitions: list[TopicPartitions] | None = f(Array(TopicPartitions))


@schema
class PartitionLogInfo(Struct):
    partition: int = f(INT32)
    last_written_leader_epoch: int = f(INT32, default=-1)
    current_leader_epoch: int = f(INT32, default=-1)
    log_end_offset: int = f(INT64, default=-1)
    error_code: int = f(INT16)


@schema
class TopicPartitionLogInfo(Struct):
    topic_id: uuid.UUID = f(UUID)
    partition_log_info: list[PartitionLogInfo] = f(Array(PartitionLogInfo))


@schema
class GetReplicaLogInfoResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    broker_epoch: int = f(INT64, default=-1)
    truncated: bool = f(BOOL)
    topic_partition_log_info_list: list[TopicPartitionLogInfo] = f(Array(TopicPartitionLogInfo))
