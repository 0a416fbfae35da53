"""Issue 23 item 4 with three real broker processes (one partition, RF 3): records deleted by
DeleteRecords under a continuous idempotent producer stay deleted when the leader is SIGKILLed.

Before, a follower that learnt the high watermark one fetch after the leader's log start passed
it stopped following the log start (and the high watermark) for good, and DeleteRecords was
answered with the leader's own start: the new leader's log start was found ~21,000 records back.
Now the answer waits until every live replica's log start has reached the requested offset.
"""

from __future__ import annotations

import threading
import time

from helpers import unique_topic
from helpers.cluster import Cluster
from helpers.cluster_metadata import SHORT_SESSION, listed_everywhere, metadata, new_topic, voters_for
from helpers.raw import Raw
from test_replication import produce

from protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopic,
)
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)

EARLIEST = -2
HIGH_WATERMARK = -1


def delete_to_high_watermark(port: int, topic: str) -> tuple[int, int]:
    """(error code, low watermark) of a DeleteRecords up to the high watermark."""
    raw = Raw(port)
    try:
        resp = raw.request(DeleteRecordsRequest(topics=[DeleteRecordsTopic(
            name=topic, partitions=[DeleteRecordsPartition(partition_index=0, offset=HIGH_WATERMARK)])],
            timeout_ms=10_000), 2)
    finally:
        raw.close()
    assert isinstance(resp, DeleteRecordsResponse)
    p = resp.topics[0].partitions[0]
    return p.error_code, p.low_watermark


def log_start(port: int, topic: str) -> tuple[int, int]:
    """(error code, earliest offset) as the broker at `port` answers ListOffsets."""
    raw = Raw(port)
    try:
        resp = raw.request(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsTopic(
            name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=EARLIEST)])]), 7)
    finally:
        raw.close()
    assert isinstance(resp, ListOffsetsResponse)
    p = resp.topics[0].partitions[0]
    return p.error_code, p.offset


def test_records_deleted_under_load_stay_deleted_after_the_leader_is_killed(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env=SHORT_SESSION)
    listed_everywhere(c)
    topic = unique_topic("delete-failover")
    leader = new_topic(c, topic, 1, 3).partitions[0][1]
    acked: list[bytes] = []
    errors: list[str] = []
    stop = threading.Event()
    producer = threading.Thread(target=produce, args=(c.bootstrap, topic, 10_000_000, acked, errors, stop), daemon=True)
    producer.start()
    deleted = 0
    try:
        c.wait_until(lambda: len(acked) > 500, timeout=30, message="the producer under way")
        for _ in range(8):
            code, low = delete_to_high_watermark(c.ports[leader], topic)
            assert code == 0, code
            deleted = max(deleted, low)
            time.sleep(0.4)
    finally:
        stop.set()
        producer.join(60)
    assert deleted > 0 and not errors, errors
    c.kill(leader)

    def new_leader() -> int | None:
        for n in c.running():
            m = metadata(c.ports[n], topic)
            if m is not None and topic in m[1] and m[1][topic].partitions[0][1] not in (leader, -1):
                return m[1][topic].partitions[0][1]
        return None

    c.wait_until(lambda: new_leader() is not None, timeout=30, message="a new leader")
    now = new_leader()
    assert now is not None
    answers: list[tuple[int, int]] = []
    c.wait_until(lambda: answers.append(log_start(c.ports[now], topic)) or answers[-1][0] == 0, timeout=30,
                 message=f"the new leader answers ListOffsets: {answers[-3:]}")
    assert answers[-1][1] >= deleted, f"the new leader's log start {answers[-1][1]} is below {deleted}, answered as deleted"
