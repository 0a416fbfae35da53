"""Issue 23 item 2 (KIP-966) across three real broker processes, one partition on two of them.

A leader back from an unclean shutdown leads under a new leader epoch. With min.insync.replicas 1
(Kafka's default), the follower falls out of the ISR (paused), the leader is killed with its log's
tail torn off and restarted at once. Kept at its old leader epoch, it took new records at offsets
the follower still held under that epoch, and the follower, back, saw no divergence: it kept its
old records and appended the leader's after them — two histories under one epoch, and records
acknowledged after the restart gone once the follower led.

Eligible leader replicas. With min.insync.replicas 2, a follower that leaves the ISR joins the
ELR and the high watermark stops; when the leader then dies, the follower leads (it holds every
acknowledged record) where the partition used to wait, offline, for the dead leader.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as Ctp
from helpers.cluster import Cluster
from helpers.cluster_metadata import agreed, listed_everywhere, new_topic, voters_for
from helpers.raw import Raw
from helpers.wait import wait_until, wait_until_no_error

from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.records import build_batch_from_messages

TOPIC = "unclean"


@pytest.fixture
def cluster(cluster_factory) -> Cluster:  # type: ignore[no-untyped-def]
    """The default session timeout (9 s): the killed leader is back before the controller fences it.
    The leader drops a silent follower from the ISR after 2 s."""
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env={"KETCH_REPLICA_LAG_TIME_MAX_MS": "2000"})
    listed_everywhere(c)
    return c


def produce(bootstrap: str, prefix: bytes, n: int) -> list[bytes]:
    """`n` records acknowledged with acks=all (an idempotent producer); the values acknowledged."""
    acked: list[bytes] = []
    errors: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": 60000, "log_level": 3})

    def done(err, msg) -> None:  # type: ignore[no-untyped-def]
        (errors.append(str(err)) if err is not None else acked.append(msg.value()))

    for i in range(n):
        p.produce(TOPIC, value=prefix + b"-%04d" % i, partition=0, on_delivery=done)
        if i % 10 == 9:  # batches of ten: a torn tail takes a few of them, not the whole log
            assert p.flush(90) == 0
    assert p.flush(90) == 0
    assert not errors, errors[:3]
    return acked


def log_bytes(c: Cluster, node: int) -> bytes:
    d = Path(c[node].data_dir) / f"{TOPIC}-0"
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


def read_all(bootstrap: str) -> list[bytes]:
    """Every record of the partition, from its start to its high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-unclean", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "log_level": 3})
    out: list[bytes] = []
    try:
        tp = Ctp(TOPIC, 0, 0)
        # a leader just elected answers OFFSET_NOT_AVAILABLE (retriable) until its high watermark
        # reaches its epoch's start, as Kafka's does: asked again until it has one
        end = wait_until(lambda: wait_until_no_error(lambda: c.get_watermark_offsets(tp, timeout=2)[1], timeout=30,
                                                     exceptions=(KafkaException,), message="a high watermark"),
                         timeout=30, message="a high watermark above 0")
        c.assign([tp])

        def read() -> bool:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(m.value())
            return m is not None and not m.error() and m.offset() >= end - 1

        wait_until(read, timeout=60, interval=0, message=f"the records up to {end}")
    finally:
        c.close()
    return out


def test_a_sole_isr_leader_back_from_an_unclean_shutdown_leads_under_a_new_epoch(cluster: Cluster) -> None:
    c = cluster
    layout = new_topic(c, TOPIC, 1, 2, {"min.insync.replicas": "1"})
    _, leader, replicas, _ = layout.partitions[0]
    follower = next(r for r in replicas if r != leader)
    bystander = next(n for n in c.node_ids if n not in replicas)
    c.wait_until(lambda: (x := agreed(c, TOPIC, c.node_ids)) is not None and sorted(x.partitions[0][3]) == sorted(replicas),
                 timeout=30, message="both replicas in sync")
    produce(c.bootstrap, b"a", 160)
    c.wait_until(lambda: log_bytes(c, follower) == log_bytes(c, leader), timeout=20, message="the follower caught up")
    c.pause(follower)
    c.wait_until(lambda: (x := agreed(c, TOPIC, [leader, bystander])) is not None
                 and x.partitions[0][3] == (leader,), timeout=30, message="the ISR down to the leader")
    c.kill(leader)
    seg = sorted((c[leader].data_dir / f"{TOPIC}-0").glob("*.log"))[-1]
    with seg.open("r+b") as f:  # the crash tore the tail off: records the follower still holds
        f.truncate(seg.stat().st_size - 700)
    c[leader].start(timeout=60)
    # the restarted leader's log end passes the follower's: no divergence by length alone
    after = produce(f"127.0.0.1:{c.ports[bystander]}", b"b", 100)
    c.resume(follower)
    c.wait_until(lambda: (x := agreed(c, TOPIC, c.node_ids)) is not None
                 and sorted(x.partitions[0][3]) == sorted(replicas), timeout=60, message="the follower back in sync")
    c.wait_until(lambda: log_bytes(c, follower) == log_bytes(c, leader), timeout=20,
                 message="the follower's log equal to the leader's (one history)")
    c.kill(leader)
    c.wait_until(lambda: (x := agreed(c, TOPIC, [follower, bystander])) is not None
                 and x.partitions[0][1] == follower, timeout=30, message="the follower leading")
    got = read_all(f"127.0.0.1:{c.ports[follower]}")
    assert len(got) == len(set(got)), "a record twice"
    missing = set(after) - set(got)
    assert not missing, f"{len(missing)} records acknowledged after the restart lost: {sorted(missing)[:5]}"


def test_the_eligible_leader_replica_leads_when_the_isr_dies(cluster: Cluster) -> None:
    c = cluster
    layout = new_topic(c, TOPIC, 1, 2, {"min.insync.replicas": "2"})
    _, leader, replicas, _ = layout.partitions[0]
    follower = next(r for r in replicas if r != leader)
    bystander = next(n for n in c.node_ids if n not in replicas)
    c.wait_until(lambda: (x := agreed(c, TOPIC, c.node_ids)) is not None and sorted(x.partitions[0][3]) == sorted(replicas),
                 timeout=30, message="both replicas in sync")
    acked = produce(c.bootstrap, b"a", 50)  # acks=all: on both
    c.pause(follower)
    c.wait_until(lambda: (x := agreed(c, TOPIC, [leader, bystander])) is not None
                 and x.partitions[0][3] == (leader,), timeout=30, message="the ISR down to the leader")
    end = high_watermark(c.ports[leader])
    assert produce_acks1(c.ports[leader], 10) == 0  # taken, but not committed: the ISR is below 2
    assert high_watermark(c.ports[leader]) == end
    c.kill(leader)
    c.resume(follower)
    c.wait_until(lambda: (x := agreed(c, TOPIC, [follower, bystander])) is not None
                 and x.partitions[0][1] == follower, timeout=40, message="the eligible replica leading")
    # alone in its ISR, below min.insync.replicas, the new leader does not advance its high
    # watermark (KIP-966): what its own high watermark had not reached when it was paused stays
    # unreadable (OFFSET_NOT_AVAILABLE) until another replica is in sync again. The old leader
    # comes back, truncates what was never committed and rejoins.
    c[leader].start(timeout=60)
    got = read_all(f"127.0.0.1:{c.ports[follower]}")
    assert sorted(got) == sorted(acked)  # every acknowledged record, nothing a consumer never saw


def high_watermark(port: int) -> int:
    raw = Raw(port)
    try:
        resp = raw.request(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsTopic(
            name=TOPIC, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 7)
    finally:
        raw.close()
    assert isinstance(resp, ListOffsetsResponse)
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0, p
    return p.offset


def produce_acks1(port: int, n: int) -> int:
    raw = Raw(port)
    try:
        batch = build_batch_from_messages([(None, b"x-%02d" % i, [], None) for i in range(n)])
        resp = raw.request(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[TopicProduceData(
            name=TOPIC, partition_data=[PartitionProduceData(index=0, records=batch)])]), 9)
    finally:
        raw.close()
    assert isinstance(resp, ProduceResponse)
    return resp.responses[0].partition_responses[0].error_code
