"""ConsumerGroupDescribe (key 69): members, epochs, subscriptions and assignments of KIP-848
consumer groups (DescribeGroups serves classic groups only). Kafka's ConsumerGroupDescribe*.json, v0."""

from __future__ import annotations

import uuid

from ..schema import BOOL, INT16, INT32, STRING, UUID, Array, Message, Struct, f, schema

KEY = 69


@schema
class ConsumerGroupDescribeRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    group_ids: list[str] = f(Array(STRING))
    include_authorized_operations: bool = f(BOOL)


@schema
class DescribedTopicPartitions(Struct):
    topic_id: uuid.UUID = f(UUID)
    topic_name: str = f(STRING)
    partitions: list[int] = f(Array(INT32))


@schema
class DescribedAssignment(Struct):
    topic_partitions: list[DescribedTopicPartitions] = f(Array(DescribedTopicPartitions))


@schema
class DescribedConsumerMember(Struct):
    member_id: str = f(STRING)
    instance_id: str | None = f(STRING, default=None)
    rack_id: str | None = f(STRING, default=None)
    member_epoch: int = f(INT32)
    client_id: str = f(STRING)
    client_host: str = f(STRING)
    subscribed_topic_names: list[str] = f(Array(STRING))
    subscribed_topic_regex: str | None = f(STRING, default=None)
    assignment: DescribedAssignment = f(DescribedAssignment)
    target_assignment: DescribedAssignment = f(DescribedAssignment)


@schema
class DescribedConsumerGroup(Struct):
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    group_id: str = f(STRING)
    group_state: str = f(STRING)
    group_epoch: int = f(INT32)
    assignment_epoch: int = f(INT32)
    assignor_name: str = f(STRING)
    members: list[DescribedConsumerMember] = f(Array(DescribedConsumerMember))
    authorized_operations: int = f(INT32, default=-2147483648)


@schema
class ConsumerGroupDescribeResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    groups: list[DescribedConsumerGroup] = f(Array(DescribedConsumerGroup))
