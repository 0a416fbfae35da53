"""CreateTopics (key 19): create topics with a partition count, replication and configs."""

from __future__ import annotations

import uuid

from ..schema import BOOL, INT8, INT16, INT32, STRING, UUID, Array, Message, Struct, f, schema

KEY = 19


@schema
class CreatableReplicaAssignment(Struct):
    partition_index: int = f(INT32)
    broker_ids: list[int] = f(Array(INT32))


@schema
class CreatableTopicConfig(Struct):
    name: str = f(STRING)
    value: str | None = f(STRING)


@schema
class CreatableTopic(Struct):
    name: str = f(STRING)
    num_partitions: int = f(INT32)
    replication_factor: int = f(INT16)
    assignments: list[CreatableReplicaAssignment] = f(Array(CreatableReplicaAssignment))
    configs: list[CreatableTopicConfig] = f(Array(CreatableTopicConfig))


@schema
class CreateTopicsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 7)
    FLEXIBLE = 5
    topics: list[CreatableTopic] = f(Array(CreatableTopic))
    timeout_ms: int = f(INT32, default=60000)
    validate_only: bool = f(BOOL, "1+", default=False)


@schema
class CreatableTopicConfigs(Struct):
    name: str = f(STRING, "5+")
    value: str | None = f(STRING, "5+")
    read_only: bool = f(BOOL, "5+")
    config_source: int = f(INT8, "5+", default=-1)
    is_sensitive: bool = f(BOOL, "5+")


@schema
class CreatableTopicResult(Struct):
    name: str = f(STRING)
    topic_id: uuid.UUID = f(UUID, "7+")
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, "1+")
    topic_config_error_code: int = f(INT16, "5+", tag=0)
    num_partitions: int = f(INT32, "5+", default=-1)
    replication_factor: int = f(INT16, "5+", default=-1)
    configs: list[CreatableTopicConfigs] | None = f(Array(CreatableTopicConfigs), "5+")


@schema
class CreateTopicsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 7)
    FLEXIBLE = 5
    throttle_time_ms: int = f(INT32, "2+")
    topics: list[CreatableTopicResult] = f(Array(CreatableTopicResult))
