"""A log directory failing on one broker of three (KIP-858): the controller hears of it and moves
the partitions that broker led there to another in-sync replica.

Every broker has two log directories; broker 1 runs with KETCH_TEST_DYING_DIR naming its second
(storage/faults.py: the disk under it dies, every file operation failing with EIO, when the
process gets SIGUSR2). Both partitions of the topic are on brokers 1, 2, 3 and led by 1; on 1,
partition 0 is in the first directory and partition 1 in the second. An idempotent acks=all
producer writes to both while the disk dies: partition 1 gets a new leader within a bounded wait,
broker 1 leaves its ISR and Metadata lists it offline there, producing to it goes on, and every
acknowledged record is read back once and in order. Partition 0 stays led by broker 1.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from confluent_kafka import Producer
from helpers import unique_topic
from helpers.cluster import Cluster
from helpers.cluster_metadata import listed_everywhere, voters_for
from helpers.confluent import QUIET, consume_all
from helpers.raw import Raw

from protocol.errors import ErrorCode
from protocol.messages.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from storage.faults import DYING_DIR_ENV, DYING_SIGNAL

NEW_LEADER_WITHIN_S = 20.0  # a few heartbeats; the broker reports at once, not at its next beat


def disks(c: Cluster, node: int) -> tuple[Path, Path]:
    base = c[node].data_dir.parent
    return base / "disk-a", base / "disk-b"


@pytest.fixture
def cluster(cluster_factory) -> Cluster:  # type: ignore[no-untyped-def]
    voters = voters_for(3)
    # the default session timeout: nothing here waits for a fence, and none should happen
    c: Cluster = cluster_factory(3, start=False, args_for=lambda c, n: ["--voters", voters])
    for n in c.node_ids:
        a, b = disks(c, n)
        c[n].env["KETCH_LOG_DIRS"] = f"{a},{b}"
    c[1].env[DYING_DIR_ENV] = str(disks(c, 1)[1])
    c.start()
    listed_everywhere(c)
    return c


def partitions(port: int, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]] | None:
    """partition -> (leader, ISR, offline replicas) as the broker at `port` answers Metadata."""
    try:
        raw = Raw(port)
    except OSError:
        return None
    try:
        resp = raw.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                           allow_auto_topic_creation=False), 12)
    finally:
        raw.close()
    assert isinstance(resp, MetadataResponse)
    return {p.partition_index: (p.leader_id, tuple(p.isr_nodes), tuple(p.offline_replicas))
            for t in resp.topics if t.name == topic and t.error_code == 0 for p in t.partitions}


def log_dirs(port: int) -> dict[str, tuple[int, set[tuple[str, int]]]]:
    raw = Raw(port)
    try:
        resp = raw.request(DescribeLogDirsRequest(topics=None), 4)
    finally:
        raw.close()
    assert isinstance(resp, DescribeLogDirsResponse)
    return {r.log_dir: (r.error_code, {(t.name, p.partition_index) for t in r.topics for p in t.partitions})
            for r in resp.results}


def test_a_failed_log_dir_moves_its_leaderships_to_other_in_sync_replicas(cluster: Cluster) -> None:
    c = cluster
    topic = unique_topic("dir-fails")
    raw = Raw(c.ports[2])
    try:
        resp = raw.request(CreateTopicsRequest(topics=[CreatableTopic(
            name=topic, num_partitions=-1, replication_factor=-1,
            assignments=[CreatableReplicaAssignment(partition_index=i, broker_ids=[1, 2, 3]) for i in (0, 1)])],
            timeout_ms=10000), 7)
    finally:
        raw.close()
    assert isinstance(resp, CreateTopicsResponse) and resp.topics[0].error_code == 0, resp
    c.wait_until(lambda: all((m := partitions(c.ports[n], topic)) and len(m) == 2 and
                             all(p == (1, (1, 2, 3), ()) for p in m.values()) for n in c.node_ids),
                 message="both partitions led by broker 1, all in sync, on every broker")
    a, b = disks(c, 1)
    c.wait_until(lambda: (topic, 1) in log_dirs(c.ports[1])[str(b)][1], message="partition 1 in broker 1's disk-b")
    assert (topic, 0) in log_dirs(c.ports[1])[str(a)][1]

    acked: dict[int, list[bytes]] = {0: [], 1: []}
    sent: dict[int, list[bytes]] = {0: [], 1: []}
    errors: list[str] = []
    stop = threading.Event()

    def keep_producing() -> None:
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 2, "message.timeout.ms": 60000, **QUIET})

        def report(err: object, msg: object) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                acked[msg.partition()].append(msg.value())  # type: ignore[attr-defined]

        i = 0
        while not stop.is_set():
            part = i % 2
            v = b"v-%d-%07d" % (part, i)
            try:
                p.produce(topic, value=v, partition=part, on_delivery=report)
            except BufferError:
                p.poll(0.01)
                continue
            sent[part].append(v)
            i += 1
            p.poll(0)
            if i % 50 == 0:
                p.poll(0.005)
        p.flush(60)

    producer = threading.Thread(target=keep_producing, name="producer", daemon=True)
    producer.start()
    try:
        c.wait_until(lambda: len(acked[1]) >= 300, message="the producer under way")
        os.kill(c[1].pid, DYING_SIGNAL)  # broker 1's disk-b dies

        def moved() -> bool:
            m = partitions(c.ports[2], topic)
            return m is not None and m[1][0] in (2, 3)

        c.wait_until(moved, timeout=NEW_LEADER_WITHIN_S, message="partition 1 led by broker 2 or 3")
        after = len(acked[1])
        c.wait_until(lambda: len(acked[1]) >= after + 300 and not errors, timeout=30,
                     message=f"producing to partition 1 goes on under its new leader (errors: {errors[:3]})")
        for n in c.node_ids:  # every broker's Metadata agrees
            c.wait_until(lambda n=n: (m := partitions(c.ports[n], topic)) is not None and m[1][0] in (2, 3)
                         and 1 not in m[1][1] and m[1][2] == (1,) and m[0] == (1, (1, 2, 3), ()),
                         message=f"broker {n}: partition 1 without broker 1 in its ISR and with it offline; "
                                 "partition 0 as it was")
        before_0 = len(acked[0])
        c.wait_until(lambda: len(acked[0]) >= before_0 + 100, message="partition 0 still taking writes on broker 1")
    finally:
        stop.set()
        producer.join(90)
    assert not producer.is_alive() and not errors, errors[:5]
    assert acked[1] == sent[1] and acked[0] == sent[0]  # each acknowledged, in the order sent

    dirs = log_dirs(c.ports[1])
    assert dirs[str(b)] == (ErrorCode.KAFKA_STORAGE_ERROR, set()) and dirs[str(a)][0] == 0
    records = consume_all(c.bootstrap, topic, 2, timeout=120)
    by_partition: dict[int, list[bytes]] = {0: [], 1: []}
    for r in records:
        by_partition[r.partition].append(r.value)
    assert by_partition[1] == acked[1]  # nothing acknowledged lost, nothing twice, in order
    assert by_partition[0] == acked[0]
