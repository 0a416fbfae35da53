"""Issue 13: the metadata quorum across three real broker processes (Kafka's KRaft messages on
their controller listeners): one leader that all agree on, its SIGKILL and a new election, a
restarted voter catching up, and what strangers get."""

from __future__ import annotations

import socket
import struct

import pytest
from helpers import free_port
from helpers.broker import port_accepts
from helpers.cluster import Cluster
from helpers.quorum_views import View, agreed_leader, controller_port, describe
from helpers.raw import Raw, producer_ids

from protocol.errors import ErrorCode
from protocol.messages.partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from protocol.messages.vote import VotePartitionRequest, VoteRequest, VoteResponse, VoteTopicRequest

ELECTION_BOUND_S = 10.0  # Kafka's defaults elect within a few seconds; ours: fetch timeout 2 s + election 1-2 s


@pytest.fixture
def quorum(cluster_factory) -> tuple[Cluster, dict[int, int]]:  # type: ignore[no-untyped-def]
    controller = {n: free_port() for n in (1, 2, 3)}
    voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in controller.items())
    return cluster_factory(3, args_for=lambda c, n: ["--voters", voters]), controller


def test_three_brokers_agree_on_one_leader_that_replicates_to_all(quorum) -> None:  # type: ignore[no-untyped-def]
    c, _ = quorum
    view: list[View] = []
    c.wait_until(lambda: view.append(v) or True if (v := agreed_leader(c, [1, 2, 3])) else False,
                 timeout=ELECTION_BOUND_S, message="one quorum leader named by all three")
    leader = view[-1]
    c.wait_until(lambda: (v := describe(c.ports[leader.leader])) is not None and v.high_watermark >= 1
                 and set(v.log_ends.values()) == {v.high_watermark}, timeout=10,
                 message="every voter holds the leader's epoch entry")
    followers = [n for n in (1, 2, 3) if n != leader.leader]
    for n in followers:
        own = describe(controller_port(c, n))  # its own view: it follows
        assert own is not None and own.error == ErrorCode.NOT_LEADER_OR_FOLLOWER and own.leader == leader.leader
        # An admin client cannot know which broker leads the quorum: any broker's client listener
        # forwards DescribeQuorum to the leader and answers with its view, as Kafka's brokers do.
        v = describe(c.ports[n])
        assert v is not None and v.error == 0 and v.leader == leader.leader, v
        assert set(v.log_ends) == {1, 2, 3} and v.high_watermark >= 1
    # ListPartitionReassignments likewise: answered on the leader's controller listener, where a
    # follower's client listener forwards it (its own image may lag the leader's).
    for port in (controller_port(c, leader.leader), c.ports[followers[0]]):
        assert _list_reassignments(port) == (0, [])


def _list_reassignments(port: int) -> tuple[int, list[object]]:
    raw = Raw(port)
    try:
        resp = raw.request(ListPartitionReassignmentsRequest(timeout_ms=5000), 0)
    finally:
        raw.close()
    assert isinstance(resp, ListPartitionReassignmentsResponse)
    return resp.error_code, list(resp.topics)


def test_sigkill_of_the_leader_elects_another_and_the_voter_rejoins(quorum) -> None:  # type: ignore[no-untyped-def]
    c, _ = quorum
    first: list[View] = []
    c.wait_until(lambda: first.append(v) or True if (v := agreed_leader(c, [1, 2, 3])) else False,
                 timeout=ELECTION_BOUND_S, message="a first leader")
    old = first[-1]
    c.kill(old.leader)
    survivors = [n for n in (1, 2, 3) if n != old.leader]
    second: list[View] = []
    c.wait_until(lambda: second.append(v) or True if (v := agreed_leader(c, survivors)) and v.epoch > old.epoch
                 else False, timeout=ELECTION_BOUND_S, message="a new leader among the two survivors")
    new = second[-1]
    assert new.leader in survivors
    c.restart(old.leader)
    c.wait_until(lambda: (v := describe(c.ports[new.leader])) is not None and v.error == 0
                 and v.log_ends.get(old.leader, -1) == v.high_watermark and v.high_watermark > old.high_watermark,
                 timeout=20, message="the restarted voter caught up with the new leader")
    back = describe(c.ports[old.leader])
    assert back is not None and (back.leader, back.epoch) == (new.leader, new.epoch)  # it did not depose anyone


def _vote(port: int, cluster_id: str, candidate: int, epoch: int) -> VoteResponse:
    raw = Raw(port)
    try:
        resp = raw.request(VoteRequest(cluster_id=cluster_id, voter_id=1, topics=[VoteTopicRequest(
            topic_name="__cluster_metadata", partitions=[VotePartitionRequest(
                partition_index=0, candidate_epoch=epoch, candidate_id=candidate, last_offset_epoch=0,
                last_offset=0, pre_vote=False)])]), 2)
    finally:
        raw.close()
    assert isinstance(resp, VoteResponse)
    return resp


def test_strangers_and_stale_candidates_are_refused_in_kafkas_terms(quorum) -> None:  # type: ignore[no-untyped-def]
    c, controller = quorum
    view: list[View] = []
    c.wait_until(lambda: view.append(v) or True if (v := agreed_leader(c, [1, 2, 3])) else False,
                 timeout=ELECTION_BOUND_S, message="a leader")
    node = next(n for n in (1, 2, 3) if n != view[-1].leader)
    assert _vote(controller[node], "another-cluster", 2, 99).error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert _vote(controller[node], "ketch-cluster", 7, 99).error_code == ErrorCode.INCONSISTENT_VOTER_SET
    stale = _vote(controller[node], "ketch-cluster", view[-1].leader, 0).topics[0].partitions[0]
    assert not stale.vote_granted and stale.leader_epoch == view[-1].epoch
    # The quorum's APIs are not on the client listener: the broker closes that connection, and lives on.
    with socket.create_connection(("127.0.0.1", c.ports[node])) as s:
        body = struct.pack(">hhih", 52, 2, 1, -1)
        s.sendall(struct.pack(">i", len(body)) + body)
        s.settimeout(5)
        assert s.recv(1) == b""
    again = describe(c.ports[node])
    assert again is not None and again.leader == view[-1].leader


def test_a_thousand_producer_ids_across_three_brokers_are_distinct(quorum) -> None:  # type: ignore[no-untyped-def]
    """Every broker takes its blocks from the active controller through the quorum."""
    c, _ = quorum
    c.wait_until(lambda: agreed_leader(c, [1, 2, 3]) is not None, timeout=ELECTION_BOUND_S, message="a leader")
    ids: list[int] = []
    for _ in range(4):
        for n in (1, 2, 3):
            ids += producer_ids(c.ports[n], 84)
    assert len(ids) == 1008 and len(set(ids)) == 1008
    # each broker's ids come from its own blocks: no two brokers share a block
    blocks = {}
    for n in (1, 2, 3):
        for pid in producer_ids(c.ports[n], 1):
            blocks.setdefault(pid // 1000, set()).add(n)
    assert all(len(owners) == 1 for owners in blocks.values())


def test_a_voter_that_fell_behind_the_snapshot_catches_up_from_it(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    from broker.quorum.store import QuorumStore  # noqa: PLC0415

    controller = {n: free_port() for n in (1, 2, 3)}
    voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in controller.items())
    c = cluster_factory(3, args_for=lambda c, n: ["--voters", voters], env={"KETCH_METADATA_SNAPSHOT_RECORDS": "3"})
    view: list[View] = []
    c.wait_until(lambda: view.append(v) or True if (v := agreed_leader(c, [1, 2, 3])) else False,
                 timeout=ELECTION_BOUND_S, message="a leader")
    leader = view[-1].leader
    behind = next(n for n in (1, 2, 3) if n != leader)
    c.kill(behind)
    producer_ids(c.ports[leader], 8000)  # eight blocks: eight records, snapshots past the dead voter's log
    c.restart(behind)
    c.wait_until(lambda: (v := describe(c.ports[leader])) is not None and v.error == 0
                 and v.log_ends.get(behind) == v.high_watermark, timeout=20, message="the voter caught up")
    c[behind].stop()
    persisted = QuorumStore(c[behind].data_dir / "__cluster_metadata-0").load()
    assert persisted.snapshot is not None and persisted.snapshot.end_offset >= 3  # it took the leader's snapshot


def _cluster_describe(bootstrap: str) -> dict:  # type: ignore[type-arg]
    import json  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from helpers import REPO_ROOT  # noqa: PLC0415

    out = subprocess.run([sys.executable, "-m", "broker", "cluster", "describe", "--bootstrap", bootstrap, "--json"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)[0]  # type: ignore[no-any-return]


def test_cluster_describe_names_the_leader_from_any_broker(quorum) -> None:  # type: ignore[no-untyped-def]
    c, _ = quorum
    view: list[View] = []
    c.wait_until(lambda: view.append(v) or True if (v := agreed_leader(c, [1, 2, 3])) else False,
                 timeout=ELECTION_BOUND_S, message="a leader")
    follower = next(n for n in (1, 2, 3) if n != view[-1].leader)
    d = _cluster_describe(f"127.0.0.1:{c.ports[follower]}")  # asked at a follower, answered by the leader
    assert (d["leader"], d["epoch"]) == (view[-1].leader, view[-1].epoch)
    assert sorted(v["node"] for v in d["voters"]) == [1, 2, 3]
    assert [v["role"] for v in d["voters"] if v["node"] == view[-1].leader] == ["leader"]


def test_a_single_broker_is_a_one_voter_quorum(broker) -> None:  # type: ignore[no-untyped-def]
    d = _cluster_describe(broker.bootstrap)
    assert d["leader"] == 1 and [v["node"] for v in d["voters"]] == [1] and d["voters"][0]["lag"] == 0


def test_a_leader_stopped_cleanly_hands_over_with_end_quorum_epoch(quorum) -> None:  # type: ignore[no-untyped-def]
    c, _ = quorum
    first: list[View] = []
    c.wait_until(lambda: first.append(v) or True if (v := agreed_leader(c, [1, 2, 3])) else False,
                 timeout=ELECTION_BOUND_S, message="a leader")
    old = first[-1]
    c[old.leader].stop()  # SIGTERM: a clean shutdown
    assert "quorum leadership handed over" in c[old.leader].log_text()
    survivors = [n for n in (1, 2, 3) if n != old.leader]
    c.wait_until(lambda: (v := agreed_leader(c, survivors)) is not None and v.epoch > old.epoch,
                 timeout=ELECTION_BOUND_S, message="a new leader after the handover")


def _describe_cluster(port: int, fenced: bool = True) -> dict[int, bool]:
    """node id -> is fenced, from DescribeCluster v2 on a broker's client listener."""
    from protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse  # noqa: PLC0415

    raw = Raw(port)
    try:
        resp = raw.request(DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                  include_fenced_brokers=fenced), 2)
    finally:
        raw.close()
    assert isinstance(resp, DescribeClusterResponse) and resp.error_code == 0
    return {b.broker_id: b.is_fenced for b in resp.brokers}


@pytest.fixture
def fast_quorum(cluster_factory) -> tuple[Cluster, dict[int, int]]:  # type: ignore[no-untyped-def]
    controller = {n: free_port() for n in (1, 2, 3)}
    voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in controller.items())
    env = {"KETCH_BROKER_HEARTBEAT_INTERVAL_MS": "300", "KETCH_BROKER_SESSION_TIMEOUT_MS": "2000"}
    return cluster_factory(3, args_for=lambda c, n: ["--voters", voters], env=env), controller


def test_brokers_register_and_a_silent_one_is_fenced_until_it_heartbeats_again(fast_quorum) -> None:  # type: ignore[no-untyped-def]
    c, _ = fast_quorum
    c.wait_until(lambda: all(_describe_cluster(c.ports[n]) == {1: False, 2: False, 3: False} for n in (1, 2, 3)),
                 timeout=20, message="three registered, unfenced brokers seen from every broker")
    view = agreed_leader(c, [1, 2, 3])
    assert view is not None
    silent = next(n for n in (1, 2, 3) if n != view.leader)  # freeze a broker that is not the quorum leader
    other = next(n for n in (1, 2, 3) if n not in (silent, view.leader))
    c.pause(silent)
    c.wait_until(lambda: _describe_cluster(c.ports[other]).get(silent) is True, timeout=15,
                 message="the frozen broker fenced")
    states = {b["node"]: b["state"] for b in _cluster_describe(f"127.0.0.1:{c.ports[other]}")["brokers"]}
    assert states == {n: "fenced" if n == silent else "alive" for n in (1, 2, 3)}
    assert silent not in _describe_cluster(c.ports[other], fenced=False)  # not offered to clients
    c.resume(silent)
    c.wait_until(lambda: _describe_cluster(c.ports[other]).get(silent) is False, timeout=15,
                 message="unfenced once it heartbeats again")


def test_a_broker_that_cannot_be_unfenced_does_not_serve_clients(quorum) -> None:  # type: ignore[no-untyped-def]
    """A restarted broker serves clients only once the controller has unfenced it, as Kafka's
    brokers wait: alone of three voters there is no controller, so its client port stays closed
    (it used to open after 10 s "anyway", answering every request with errors), while its
    controller listener is up for the quorum to form; once a second voter is back it is served."""
    c, controller = quorum
    c.wait_until(lambda: agreed_leader(c, [1, 2, 3]), timeout=ELECTION_BOUND_S, message="a first leader")
    for n in (1, 2, 3):
        c.kill(n)
    lone = c[1]
    lone.start(wait=False)
    c.wait_until(lambda: lone.log_text().count("not unfenced by an active controller yet") >= 2, timeout=30,
                 message="the lone broker to say twice that it waits to be unfenced")
    assert port_accepts("127.0.0.1", controller[1])  # the quorum's listener is up
    assert not port_accepts("127.0.0.1", c.ports[1])
    c[2].start(wait=False)
    c.wait_until(lambda: port_accepts("127.0.0.1", c.ports[1]), timeout=30,
                 message="the broker to serve clients once a quorum unfenced it")
    c[2].wait_ready(30)
    text = lone.log_text()
    assert text.rindex("broker unfenced") < text.rindex("broker started")
