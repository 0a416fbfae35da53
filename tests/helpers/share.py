"""confluent-kafka's ShareConsumer (librdkafka 2.16, KIP-932) as the share-group tests drive it."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import AcknowledgeType, Message, ShareConsumer

from .confluent import QUIET

# a share-partition starts at the log start, so records produced before the consumers are delivered;
# heartbeats come often so that members join quickly
SHARE_ENV = {"KETCH_SHARE_AUTO_OFFSET_RESET": "earliest", "KETCH_GROUP_SHARE_HEARTBEAT_INTERVAL_MS": "300"}


def share_consumer(bootstrap: str, group: str, topics: Sequence[str], **conf: Any) -> ShareConsumer:
    """An explicit-acknowledgement share consumer: every record is ACCEPTed, RELEASEd or REJECTed by the test."""
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit",
                       "max.poll.records": 5, **QUIET, **conf})
    c.subscribe(list(topics))
    return c


def poll_round(consumers: Sequence[ShareConsumer], decide: Callable[[int, Message], AcknowledgeType],
               timeout: float = 0.2) -> list[tuple[int, Message]]:
    """One poll of each consumer; every record acknowledged as `decide` says. (consumer index, message)."""
    out = []
    for i, c in enumerate(consumers):
        for m in c.poll(timeout) or ():
            if m.error():
                raise AssertionError(f"consumer {i}: {m.error()}")
            c.acknowledge(m, decide(i, m))
            out.append((i, m))
    return out


def poll_until(consumers: Sequence[ShareConsumer], decide: Callable[[int, Message], AcknowledgeType],
               done: Callable[[list[tuple[int, Message]]], bool], timeout: float,
               message: str) -> list[tuple[int, Message]]:
    """Poll round after round until `done(everything polled)`, or fail after `timeout` seconds."""
    got: list[tuple[int, Message]] = []
    deadline = time.monotonic() + timeout
    while not done(got):
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} (polled {len(got)} records)")
        got += poll_round(consumers, decide)
    return got


def quiet_rounds(consumers: Sequence[ShareConsumer], seconds: float) -> list[tuple[int, Message]]:
    """What the consumers still get for `seconds` (each accepted): a record finished must never come back."""
    got: list[tuple[int, Message]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got += poll_round(consumers, lambda i, m: AcknowledgeType.ACCEPT)
    return got


def close_all(consumers: Sequence[ShareConsumer]) -> None:
    for c in consumers:
        c.close()
