"""ShareGroupHeartbeat (key 76): a member of a KIP-932 share group joins, heartbeats and leaves; the
coordinator answers with its member epoch and its assignment (partitions other members may share).

Kafka's ShareGroupHeartbeatRequest/Response.json. Version 0 was Kafka 4.0's early access, removed in
4.1; version 1 is the stable one, and the only one librdkafka 2.16's ShareConsumer sends."""

from __future__ import annotations

import uuid

from ..schema import INT16, INT32, STRING, UUID, Array, Message, NullableStruct, Struct, f, schema

KEY = 76


@schema
class ShareGroupHeartbeatRequest(Message):
    API_KEY = KEY
    VERSIONS = (1, 1)
    FLEXIBLE = 0
    group_id: str = f(STRING)
    member_id: str = f(STRING)
    member_epoch: int = f(INT32)
    rack_id: str | None = f(STRING, default=None)
    subscribed_topic_names: list[str] | None = f(Array(STRING), default=None)


@schema
class ShareTopicPartitions(Struct):
    topic_id: uuid.UUID = f(UUID)
    partitions: list[int] = f(Array(INT32))


@schema
class ShareAssignment(Struct):
    topic_partitions: list[ShareTopicPartitions] = f(Array(ShareTopicPartitions))


@schema
class ShareGroupHeartbeatResponse(Message):
    API_KEY = KEY
    VERSIONS = (1, 1)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    member_id: str | None = f(STRING, default=None)
    member_epoch: int = f(INT32)
    heartbeat_interval_ms: int = f(INT32)
    assignment: ShareAssignment | None = f(NullableStruct(ShareAssignment), default=None)
