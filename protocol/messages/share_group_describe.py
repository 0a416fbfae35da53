"""ShareGroupDescribe (key 77): members, epochs, subscriptions and assignments of KIP-932 share
groups. Kafka's ShareGroupDescribeRequest/Response.json, version 1 (Kafka 4.1's stable version)."""

from __future__ import annotations

import uuid

from ..schema import BOOL, INT16, INT32, STRING, UUID, Array, Message, Struct, f, schema

KEY = 77


@schema
class ShareGroupDescribeRequest(Message):
    API_KEY = KEY
    VERSIONS = (1, 1)
    FLEXIBLE = 0
    group_ids: list[str] = f(Array(STRING))
    include_authorized_operations: bool = f(BOOL)


@schema
class ShareDescribedTopicPartitions(Struct):
    topic_id: uuid.UUID = f(UUID)
    topic_name: str = f(STRING)
    partitions: list[int] = f(Array(INT32))


@schema
class ShareDescribedAssignment(Struct):
    topic_partitions: list[ShareDescribedTopicPartitions] = f(Array(ShareDescribedTopicPartitions))


@schema
class ShareDescribedMember(Struct):
    member_id: str = f(STRING)
    rack_id: str | None = f(STRING, default=None)
    member_epoch: int = f(INT32)
    client_id: str = f(STRING)
    client_host: str = f(STRING)
    subscribed_topic_names: list[str] = f(Array(STRING))
    assignment: ShareDescribedAssignment = f(ShareDescribedAssignment)


@schema
class ShareDescribedGroup(Struct):
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)
    group_id: str = f(STRING)
    group_state: str = f(STRING)
    group_epoch: int = f(INT32)
    assignment_epoch: int = f(INT32)
    assignor_name: str = f(STRING)
    members: list[ShareDescribedMember] = f(Array(ShareDescribedMember))
    authorized_operations: int = f(INT32, default=-2147483648)


@schema
class ShareGroupDescribeResponse(Message):
    API_KEY = KEY
    VERSIONS = (1, 1)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    groups: list[ShareDescribedGroup] = f(Array(ShareDescribedGroup))
