"""BrokerRegistration (key 62): a broker announces itself (listeners, rack) to the active
controller and gets its broker epoch."""

from __future__ import annotations

import uuid

from ..schema import BOOL, INT16, INT32, INT64, STRING, UINT16, UUID, Array, Message, Struct, f, schema

KEY = 62


@schema
class Listener(Struct):
    name: str = f(STRING)
    host: str = f(STRING)
    port: int = f(UINT16)
    security_protocol: int = f(INT16)


@schema
class Feature(Struct):
    name: str = f(STRING)
    min_supported_version: int = f(INT16)
    max_supported_version: int = f(INT16)


@schema
class BrokerRegistrationRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 4)
    FLEXIBLE = 0
    broker_id: int = f(INT32)
    cluster_id: str = f(STRING)
    incarnation_id: uuid.UUID = f(UUID)
    listeners: list[Listener] = f(Array(Listener))
    features: list[Feature] = f(Array(Feature))
    rack: str | None = f(STRING, default=None)
    is_migrating_zk_broker: bool = f(BOOL, "1+")
    log_dirs: list[uuid.UUID] = f(Array(UUID), "2+")
    previous_broker_epoch: int = f(INT64, "3+", default=-1)


@schema
class BrokerRegistrationResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 4)
    FLEXIBLE = 0
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    broker_epoch: int = f(INT64, default=-1)
