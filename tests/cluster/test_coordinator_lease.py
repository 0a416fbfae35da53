"""A group coordinator cut off from the controller stops answering from memory.

The chaos campaign's first cycle isolated one broker from the other two while clients still
reached it: it went on answering OffsetFetch as the leader of `__consumer_offsets` partitions the
controller had long given to another broker, with offsets that no longer were the group's (none),
and a transactional copier started over from its first input — a duplicate, committed. A broker
holds its leaderships under a lease renewed by acknowledged heartbeats, ending before the
controller may fence it (broker/lifecycle.py); without it, it answers NOT_COORDINATOR.
"""

from __future__ import annotations

from helpers.cluster import Cluster
from helpers.cluster_metadata import coordinator
from helpers.raw import Raw
from helpers.txn import RawTxn, create_topic_at, offset_at

from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)

NOT_COORDINATOR = 16
SESSION_S = 3.0  # KETCH_BROKER_SESSION_TIMEOUT_MS of the shared fixture (tests/cluster/conftest.py)


def _controller(c: Cluster) -> int:
    raw = Raw(c.ports[1])
    try:
        resp = raw.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
    finally:
        raw.close()
    assert isinstance(resp, MetadataResponse)
    return resp.controller_id


def test_a_coordinator_that_cannot_reach_the_controller_answers_not_coordinator(cluster: Cluster) -> None:
    c = cluster
    topic = "leased-input"
    create_topic_at(c.ports[1], topic, 1)
    # A group whose coordinator is not the active controller: cut off from its peers, the active
    # controller still acknowledges its own heartbeats until it gives up the quorum's leadership,
    # and its lease ends later (3.4 s after the cut, measured once) — no other controller can fence
    # it before one is elected and a session timeout has passed. The deadline below is for a
    # coordinator that heartbeats to another broker; the fixed group name put the coordinator on
    # the controller in one of four suite runs, and the test failed for its placement.
    c.wait_until(lambda: coordinator(c.ports[1], "probe", 0) in c.node_ids, timeout=30, message="__consumer_offsets")
    controller = _controller(c)
    group = next(g for g in (f"leased-group-{i}" for i in range(300))
                 if coordinator(c.ports[1], g, 0) not in (controller, -1))

    def fetch(node: int) -> tuple[int, int]:
        top, _, offset = offset_at(c.ports[node], group, topic, 0)
        return top, offset

    def committed() -> bool:
        node = coordinator(c.ports[1], group, 0)
        if node not in c.node_ids:
            return False
        raw = RawTxn(c.ports[node])
        try:
            resp = raw.request(OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                                   topics=[OffsetCommitRequestTopic(name=topic, partitions=[
                                                       OffsetCommitRequestPartition(partition_index=0,
                                                                                    committed_offset=5)])]), 7)
        finally:
            raw.close()
        assert isinstance(resp, OffsetCommitResponse)
        return resp.topics[0].partitions[0].error_code == 0

    c.wait_until(committed, timeout=30, message="an offset commit")
    # Served from the coordinator once it holds its lease: under a loaded suite (the shared
    # fixture's session timeout is 3 s) a heartbeat late for a moment answers NOT_COORDINATOR
    # until the next one, which is the lease doing its job, not the failure tested below.
    c.wait_until(lambda: (n := coordinator(c.ports[1], group, 0)) in c.node_ids and fetch(n) == (0, 5), timeout=30,
                 message="the committed offset served by the coordinator")
    node = coordinator(c.ports[1], group, 0)
    peers = [n for n in c.node_ids if n != node]
    for n in peers:
        c.pause(n)  # no controller can answer the coordinator's heartbeats now
    try:
        # within a session timeout of the cut: before a controller could have fenced it and
        # handed its partitions to another broker
        c.wait_until(lambda: fetch(node)[0] == NOT_COORDINATOR, timeout=SESSION_S,
                     message="the cut-off coordinator to stop answering")
    finally:
        for n in peers:
            c.resume(n)

    def served_again() -> bool:
        now = coordinator(c.ports[node], group, 0)
        return now in c.node_ids and fetch(now) == (0, 5)

    c.wait_until(served_again, timeout=30, message="the group's offsets served again")
