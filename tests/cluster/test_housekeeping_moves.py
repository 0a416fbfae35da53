"""Issue 14: the timers that clean up after users — transactional-id expiry, group offset expiry
and log retention — keep working on the broker that takes over when leadership moves (three real
processes, SIGKILL).
"""

from __future__ import annotations

import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from helpers import REPO_ROOT
from helpers.cluster import Cluster
from helpers.cluster_metadata import (
    SHORT_SESSION,
    agreed,
    coordinator,
    listed_everywhere,
    new_topic,
    voters_for,
)
from helpers.confluent import QUIET, list_offsets
from helpers.raw import Raw
from helpers.wait import wait_until

from protocol.errors import ErrorCode
from protocol.messages.describe_transactions import DescribeTransactionsRequest, DescribeTransactionsResponse
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)


def _txn_error(c: Cluster, node: int, tid: str) -> int:
    """DescribeTransactions' error for `tid` at its coordinator `node`."""
    raw = Raw(c.ports[node])
    try:
        resp = raw.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0)
    finally:
        raw.close()
    assert isinstance(resp, DescribeTransactionsResponse)
    return resp.transaction_states[0].error_code


def test_id_expiry_and_retention_carry_on_after_their_leader_is_killed(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env={**SHORT_SESSION, "KETCH_REPLICA_LAG_TIME_MAX_MS": "4000",
                                      "KETCH_TRANSACTIONAL_ID_EXPIRATION_MS": "6000",
                                      "KETCH_TRANSACTION_ABORT_TIMED_OUT_INTERVAL_MS": "500",
                                      "KETCH_LOG_RETENTION_CHECK_INTERVAL_MS": "200",
                                      "KETCH_OFFSETS_RETENTION_CHECK_INTERVAL_MS": "500"})
    listed_everywhere(c)
    layout = new_topic(c, "aging", 1, 3, {"segment.bytes": "1024", "min.insync.replicas": "2"})
    victim = layout.partitions[0][1]
    wait_until(lambda: coordinator(c.ports[1], "probe", 1) > 0, timeout=30, message="__transaction_state")
    wait_until(lambda: coordinator(c.ports[1], "probe", 0) > 0, timeout=30, message="__consumer_offsets")
    # A transactional id and a group coordinated by the topic's leader: one kill moves all three.
    tid = next(t for t in (f"aging-{i}" for i in range(500)) if coordinator(c.ports[1], t, 1) == victim)
    group = next(g for g in (f"aging-group-{i}" for i in range(500)) if coordinator(c.ports[1], g, 0) == victim)
    # OffsetCommit v2's retention_time_ms: this offset expires 20 s after it is committed.
    def commit() -> int:
        """The commit's error; the victim may still be taking the group's partition over (its load,
        its lease): NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS, which clients retry."""
        raw = Raw(c.ports[victim])
        try:
            resp = raw.request(OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                                   retention_time_ms=20000, topics=[OffsetCommitRequestTopic(
                                                       name="aging", partitions=[OffsetCommitRequestPartition(
                                                           partition_index=0, committed_offset=5,
                                                           committed_metadata="")])]), 2)
        finally:
            raw.close()
        assert isinstance(resp, OffsetCommitResponse)
        code = resp.topics[0].partitions[0].error_code
        assert code in (0, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), code
        return code

    wait_until(lambda: commit() == 0, timeout=30, message="the offset committed on its coordinator")

    def committed() -> int:
        consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False,
                             **QUIET})
        try:
            return int(consumer.committed([TopicPartition("aging", 0)], timeout=10)[0].offset)
        finally:
            consumer.close()

    assert committed() == 5

    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "transactional.id": tid, **QUIET})
    p.init_transactions(30)  # the id now exists, idle: it expires 6 s after this
    p.begin_transaction()
    hour_ago = int(time.time() * 1000) - 3_600_000
    for i in range(20):
        p.produce("aging", b"v" * 400 + b"%02d" % i, partition=0, timestamp=hour_ago)
        p.flush(30)  # one batch each: about two per 1 KiB segment
    p.commit_transaction(30)
    del p
    assert _txn_error(c, victim, tid) == 0
    assert list_offsets(c.bootstrap, "aging", 1)[0][0] == 0

    c.kill(victim)
    others = [n for n in c.node_ids if n != victim]
    c.wait_until(lambda: (x := agreed(c, "aging", others)) is not None and x.partitions[0][1] not in (victim, -1),
                 timeout=30, message="a new leader for the topic")
    c.wait_until(lambda: coordinator(c.ports[others[0]], tid, 1) in others, timeout=30, message="a new coordinator for the id")
    heir = coordinator(c.ports[others[0]], tid, 1)
    c.wait_until(lambda: coordinator(c.ports[others[0]], group, 0) in others, timeout=30,
                 message="a new coordinator for the group")

    # The new group coordinator loaded the offset with its expiry time, and drops it when due.
    assert committed() == 5
    c.wait_until(lambda: committed() < 0, timeout=40, message="the offset expired on its new coordinator")

    # The new coordinator loaded the id and removes it once it has been idle for the expiration time.
    c.wait_until(lambda: _txn_error(c, heir, tid) == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, timeout=30,
                 message="the id expired on its new coordinator")
    assert "removing expired transactional id" in c[heir].log_text()

    # Retention on the new leader: a minute of retention drops the hour-old segments.
    out = subprocess.run([sys.executable, "-m", "broker", "topic", "alter-config", "aging", "--set", "retention.ms=60000",
                          "--bootstrap", f"127.0.0.1:{c.ports[others[0]]}"], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    c.wait_until(lambda: list_offsets(c.bootstrap, "aging", 1)[0][0] > 0, timeout=30,
                 message="retention to delete old segments on the new leader")
