"""FindCoordinator (key 10): locate the broker coordinating a consumer group or a transactional id."""

from __future__ import annotations

from ..schema import INT8, INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 10


@schema
class FindCoordinatorRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 6)
    FLEXIBLE = 3
    key: str = f(STRING, "0-3")
    key_type: int = f(INT8, "1+", default=0)
    coordinator_keys: list[str] = f(Array(STRING), "4+")


@schema
class Coordinator(Struct):
    key: str = f(STRING, "4+")
    node_id: int = f(INT32, "4+")
    host: str = f(STRING, "4+")
    port: int = f(INT32, "4+")
    error_code: int = f(INT16, "4+")
    error_message: str | None = f(STRING, "4+")


@schema
class FindCoordinatorResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 6)
    FLEXIBLE = 3
    throttle_time_ms: int = f(INT32, "1+")
    error_code: int = f(INT16, "0-3")
    error_message: str | None = f(STRING, "1-3")
    node_id: int = f(INT32, "0-3")
    host: str = f(STRING, "0-3")
    port: int = f(INT32, "0-3")
    coordinators: list[Coordinator] = f(Array(Coordinator), "4+")
