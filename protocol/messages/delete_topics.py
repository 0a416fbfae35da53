"""DeleteTopics (key 20): delete topics by name (or, from v6, by topic id)."""

from __future__ import annotations

import uuid

from ..schema import INT16, INT32, STRING, UUID, Array, Message, Struct, f, schema

KEY = 20


@schema
class DeleteTopicState(Struct):
    name: str | None = f(STRING, "6+", default=None)
    topic_id: uuid.UUID = f(UUID, "6+")


@schema
class DeleteTopicsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 6)
    FLEXIBLE = 4
    topics: list[DeleteTopicState] = f(Array(DeleteTopicState), "6+")
    topic_names: list[str] = f(Array(STRING), "0-5")
    timeout_ms: int = f(INT32)


@schema
class DeletableTopicResult(Struct):
    name: str | None = f(STRING)
    topic_id: uuid.UUID = f(UUID, "6+")
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, "5+", default=None)


@schema
class DeleteTopicsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 6)
    FLEXIBLE = 4
    throttle_time_ms: int = f(INT32, "1+")
    responses: list[DeletableTopicResult] = f(Array(DeletableTopicResult))
