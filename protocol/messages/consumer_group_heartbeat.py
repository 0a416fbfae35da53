"""ConsumerGroupHeartbeat (key 68): a member of a KIP-848 consumer group joins, heartbeats, acknowledges
its revocations and leaves; the coordinator answers with its member epoch and its assignment.

Kafka's ConsumerGroupHeartbeatRequest/Response.json. v1 adds SubscribedTopicRegex (what librdkafka
2.16 asks for: it sends v1 only). Every field that did not change since the previous heartbeat may be
sent null (or -1)."""

from __future__ import annotations

import uuid

from ..schema import INT16, INT32, STRING, UUID, Array, Message, NullableStruct, Struct, f, schema

KEY = 68


@schema
class HeartbeatTopicPartitions(Struct):
    topic_id: uuid.UUID = f(UUID)
    partitions: list[int] = f(Array(INT32))


@schema
class ConsumerGroupHeartbeatRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 1)
    FLEXIBLE = 0
    group_id: str = f(STRING)
    member_id: str = f(STRING)
    member_epoch: int = f(INT32)
    instance_id: str | None = f(STRING, default=None)
    rack_id: str | None = f(STRING, default=None)
    rebalance_timeout_ms: int = f(INT32, default=-1)
    subscribed_topic_names: list[str] | None = f(Array(STRING), default=None)
    subscribed_topic_regex: str | None = f(STRING, "1+", default=None)
    server_assignor: str | None = f(STRING, default=None)
    topic_partitions: list[HeartbeatTopicPartitions] | None = f(Array(HeartbeatTopicPartitions), default=None)


@schema
class HeartbeatAssignment(Struct):
    topic_partitions: list[HeartbeatTopicPartitions] = f(Array(HeartbeatTopicPartitions))


@schema
class ConsumerGroupHeartbeatResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 1)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    member_id: str | None = f(STRING, default=None)
    member_epoch: int = f(INT32)
    heartbeat_interval_ms: int = f(INT32)
    assignment: HeartbeatAssignment | None = f(NullableStruct(HeartbeatAssignment), default=None)
