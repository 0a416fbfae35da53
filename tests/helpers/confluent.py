"""confluent-kafka (librdkafka) building blocks used by the compat, integration and chaos tests."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from .records import Consumed, Msg
from .wait import wait_until

QUIET = {"log_level": 3}  # librdkafka logs only errors, keeps pytest output readable


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **QUIET})


def topic_partition_count(bootstrap: str, topic: str, timeout: float = 10.0) -> int | None:
    """Partition count the broker's metadata reports for ``topic`` (None if unknown/errored)."""
    md = admin(bootstrap).list_topics(topic=topic, timeout=timeout)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return len(t.partitions)


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """CreateTopics through AdminClient, then wait until metadata shows every partition with a leader."""
    client = admin(bootstrap)  # must outlive the future: destroying it cancels the request
    fut = client.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=-1)], request_timeout=timeout
    )[topic]
    fut.result(timeout)
    del client

    wait_visible(bootstrap, topic, partitions, timeout)


def wait_visible(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Until every broker of `bootstrap` lists the topic with all its partitions led: on a cluster
    the brokers learn of a new topic a moment apart, and a request to a leader that has not yet
    would get UNKNOWN_TOPIC_OR_PARTITION."""

    def visible_at(address: str) -> bool:
        md = admin(address).list_topics(topic=topic, timeout=5)
        t = md.topics.get(topic)
        return (
            t is not None
            and t.error is None
            and len(t.partitions) == partitions
            and all(p.leader >= 0 for p in t.partitions.values())
        )

    wait_until(lambda: all(visible_at(a) for a in bootstrap.split(",")), timeout=timeout, interval=0.1,
               message=f"topic {topic} with {partitions} partitions")


def produce(
    bootstrap: str,
    topic: str,
    msgs: Sequence[Msg],
    conf: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
    on_ack: Callable[[Msg, int, int], None] | None = None,
) -> dict[int, tuple[int, int]]:
    """Produce ``msgs`` in order, flush, and return idx -> (partition, offset) from delivery reports.

    Fails if any delivery report carries an error or if messages are still undelivered at the deadline.
    """
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", **QUIET, **(conf or {})})
    acks: dict[int, tuple[int, int]] = {}
    errors: list[tuple[int, KafkaError]] = []

    def report(m: Msg) -> Callable[[KafkaError | None, Any], None]:
        def cb(err: KafkaError | None, rec: Any) -> None:
            if err is not None:
                errors.append((m.idx, err))
            else:
                acks[m.idx] = (rec.partition(), rec.offset())
                if on_ack is not None:
                    on_ack(m, rec.partition(), rec.offset())

        return cb

    deadline = time.monotonic() + timeout
    for m in msgs:
        while True:
            try:
                p.produce(topic, key=m.key, value=m.value, on_delivery=report(m))
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                p.poll(0.05)
                if time.monotonic() > deadline:
                    raise AssertionError(f"producer queue stayed full for {timeout}s") from None
        p.poll(0)
    left = p.flush(max(0.0, deadline - time.monotonic()))
    assert not errors, f"{len(errors)} delivery errors, first: {errors[:3]}"
    assert left == 0, f"{left} messages still undelivered after {timeout}s"
    assert len(acks) == len(msgs)
    return acks


def list_offsets(
    bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted", timeout: float = 20.0
) -> dict[int, tuple[int, int]]:
    """(earliest, latest) offset per partition via AdminClient.list_offsets (one ListOffsets each)."""
    level = (
        IsolationLevel.READ_COMMITTED if isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
    )
    client = admin(bootstrap)
    out: dict[int, list[int]] = {p: [] for p in range(partitions)}
    for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):
        futs = client.list_offsets(
            {TopicPartition(topic, p): spec for p in range(partitions)},
            isolation_level=level,
            request_timeout=timeout,
        )
        for tp, fut in futs.items():
            out[tp.partition].append(fut.result(timeout).offset)
    return {p: (v[0], v[1]) for p, v in out.items()}


def consume_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    conf: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
    check_watermarks: bool = True,
) -> list[Consumed]:
    """Read every partition of ``topic`` from the beginning until each reports end-of-partition.

    No consumer group protocol is used for assignment (``assign``), offsets are never committed.
    With ``check_watermarks`` (for non-transactional topics that were never truncated) also checks that
    ListOffsets reports exactly (earliest=0, latest=records read) for each partition.
    """
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"compat-{uuid.uuid4().hex[:8]}",  # required by the client; joins no group
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,  # end-of-partition is noticed sooner; keeps the suite fast
            **QUIET,
            **(conf or {}),
        }
    )
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: list[Consumed] = []
        at_eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while at_eof != set(range(partitions)):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"consumed {len(out)} records but partitions {sorted(set(range(partitions)) - at_eof)} "
                    f"never reached end-of-partition within {timeout}s"
                )
            for m in c.consume(1000, 0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_eof.add(m.partition())
                        continue
                    raise KafkaException(err)
                at_eof.discard(m.partition())
                out.append(Consumed(m.partition(), m.offset(), m.key(), m.value()))
        if not check_watermarks:
            return out
        counts = {p: 0 for p in range(partitions)}
        for r in out:
            counts[r.partition] += 1
        isolation = (conf or {}).get("isolation.level", "read_committed")  # librdkafka's default
        ends = list_offsets(bootstrap, topic, partitions, isolation)
        assert ends == {p: (0, counts[p]) for p in range(partitions)}, (
            f"ListOffsets (earliest, latest) per partition {ends} disagree with records read {counts}"
        )
        return out
    finally:
        c.close()
