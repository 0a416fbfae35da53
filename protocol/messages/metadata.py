"""Metadata (key 3): which brokers exist, and which topics/partitions they lead."""

from __future__ import annotations

import uuid

from ..schema import BOOL, INT16, INT32, STRING, UUID, Array, Message, Struct, f, schema

KEY = 3


@schema
class MetadataRequestTopic(Struct):
    topic_id: uuid.UUID = f(UUID, "10+")
    name: str | None = f(STRING)


@schema
class MetadataRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 12)
    FLEXIBLE = 9
    topics: list[MetadataRequestTopic] | None = f(Array(MetadataRequestTopic))
    allow_auto_topic_creation: bool = f(BOOL, "4+", default=True)
    include_cluster_authorized_operations: bool = f(BOOL, "8-10")
    include_topic_authorized_operations: bool = f(BOOL, "8+")


@schema
class MetadataResponseBroker(Struct):
    node_id: int = f(INT32)
    host: str = f(STRING)
    port: int = f(INT32)
    rack: str | None = f(STRING, "1+", default=None)


@schema
class MetadataResponsePartition(Struct):
    error_code: int = f(INT16)
    partition_index: int = f(INT32)
    leader_id: int = f(INT32)
    leader_epoch: int = f(INT32, "7+", default=-1)
    replica_nodes: list[int] = f(Array(INT32))
    isr_nodes: list[int] = f(Array(INT32))
    offline_replicas: list[int] = f(Array(INT32), "5+")


@schema
class MetadataResponseTopic(Struct):
    error_code: int = f(INT16)
    name: str | None = f(STRING)
    topic_id: uuid.UUID = f(UUID, "10+")
    is_internal: bool = f(BOOL, "1+", default=False)
    partitions: list[MetadataResponsePartition] = f(Array(MetadataResponsePartition))
    topic_authorized_operations: int = f(INT32, "8+", default=-2147483648)


@schema
class MetadataResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 12)
    FLEXIBLE = 9
    throttle_time_ms: int = f(INT32, "3+")
    brokers: list[MetadataResponseBroker] = f(Array(MetadataResponseBroker))
    cluster_id: str | None = f(STRING, "2+", default=None)
    controller_id: int = f(INT32, "1+", default=-1)
    topics: list[MetadataResponseTopic] = f(Array(MetadataResponseTopic))
    cluster_authorized_operations: int = f(INT32, "8-10", default=-2147483648)
