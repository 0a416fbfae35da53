"""Issue 25: every `ketch topic|group|txn|cluster` command on three brokers, each given as
`--bootstrap` a broker that leads nothing the command asks about (node 3: no replica of the
topics, not the coordinator of the group or the transactional id).

A command has to reach each partition's leader and each group's or transactional id's
coordinator. Asked of node 3 itself, `topic describe` failed with NOT_LEADER_OR_FOLLOWER,
`group describe` printed END -1 (and a lag it could not know), `group list` missed the groups
other brokers coordinate and `topic sizes` the replicas on other brokers.

One cluster serves the whole module; each test uses its own topics, group and transactional id.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import REPO_ROOT, Cluster
from helpers.cluster_metadata import agreed, coordinator, listed_everywhere, metadata, voters_for
from helpers.raw import Raw
from helpers.txn import RawTxn, txn_batch

from protocol.errors import ErrorCode
from protocol.messages.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
)

BOOT = 3  # the broker every command is given: it holds no replica of a test topic
GROUP, TXN = 0, 1
COORDINATOR_NOT_READY = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                         ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS)


@pytest.fixture(scope="module")
def c(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    voters = voters_for(3)
    cl = Cluster(tmp_path_factory.mktemp("admin-cli"), 3, args_for=lambda c, n: ["--voters", voters])
    try:
        cl.start()
        listed_everywhere(cl)
        yield cl
    finally:
        cl.close()


def ketch(c: Cluster, *args: str, bootstrap: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker", *args,
                           "--bootstrap", bootstrap or f"127.0.0.1:{c.ports[BOOT]}"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)


def ok(c: Cluster, *args: str, bootstrap: str | None = None) -> str:
    r = ketch(c, *args, bootstrap=bootstrap)
    assert r.returncode == 0, f"ketch {' '.join(args)}: {r.stderr}"
    return r.stdout


def js(c: Cluster, *args: str, bootstrap: str | None = None) -> Any:
    return json.loads(ok(c, *args, "--json", bootstrap=bootstrap))


def create_assigned(c: Cluster, name: str, assignment: list[list[int]]) -> None:
    """A topic whose partition i has replicas assignment[i], led by the first, in sync everywhere."""
    raw = Raw(c.ports[1])
    try:
        resp = raw.request(CreateTopicsRequest(topics=[CreatableTopic(
            name=name, num_partitions=-1, replication_factor=-1,
            assignments=[CreatableReplicaAssignment(partition_index=i, broker_ids=r)
                         for i, r in enumerate(assignment)])], timeout_ms=10000), 7)
    finally:
        raw.close()
    assert isinstance(resp, CreateTopicsResponse) and resp.topics[0].error_code == 0, resp
    c.wait_until(lambda: (x := agreed(c, name, [1, 2, 3])) is not None and [
        (p[0], p[1], list(p[2]), sorted(p[3])) for p in x.partitions] == [
        (0, r[0], r, sorted(r)) for r in assignment], timeout=30, message=f"{name} led and in sync as assigned")


def produce(c: Cluster, leader: int, topic: str, partition: int, n: int) -> None:
    raw = RawTxn(c.ports[leader])
    try:
        assert raw.produce(topic, partition, txn_batch(-1, -1, -1, n, transactional=False), None)[0] == 0
    finally:
        raw.close()


def coordinated_by(c: Cluster, node: int, key_type: int, prefix: str) -> str:
    """A group name (key_type 0) or transactional id (1) whose coordinator is `node`."""
    def answer(key: str) -> int:
        seen: list[int] = []
        c.wait_until(lambda: seen.append(coordinator(c.ports[BOOT], key, key_type)) or seen[-1] >= 0,
                     timeout=30, message=f"a coordinator for {key}")
        return seen[-1]

    key = next((k for k in (f"{prefix}-{i}" for i in range(1000)) if answer(k) == node), None)
    assert key is not None, f"no {prefix}-N coordinated by node {node}"
    return key


def partitions_listed(c: Cluster, name: str) -> int | None:
    return next((t["partitions"] for t in js(c, "topic", "list") if t["topic"] == name), None)


def test_topic_create_list_configs_alter_add_partitions_delete(c: Cluster) -> None:
    assert ok(c, "topic", "create", "made", "--partitions", "2", "--replication-factor", "2",
              "--config", "retention.ms=60000").strip() == "created made"
    c.wait_until(lambda: partitions_listed(c, "made") == 2, timeout=10, message="made listed with 2 partitions")
    assert {"topic": "made", "partitions": 2, "internal": False} in js(c, "topic", "list")
    again = ketch(c, "topic", "create", "made")
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr

    assert ok(c, "topic", "alter-config", "made", "--set", "segment.bytes=1048576", "--delete",
              "retention.ms").strip() == "altered: made"

    def configs() -> dict[str, tuple[str, str]]:
        return {r["config"]: (r["value"], r["source"]) for r in js(c, "topic", "configs", "made")}
    c.wait_until(lambda: configs()["segment.bytes"] == ("1048576", "topic")
                 and configs()["retention.ms"][1] == "default", timeout=10, message="the configs altered")

    assert ok(c, "topic", "add-partitions", "made", "--partitions", "3").strip() == "now: made with 3 partitions"
    c.wait_until(lambda: partitions_listed(c, "made") == 3, timeout=10, message="made with 3 partitions")
    assert ok(c, "topic", "delete", "made").strip() == "deleted made"
    c.wait_until(lambda: partitions_listed(c, "made") is None, timeout=10, message="made gone")


def test_topic_describe_delete_records_sizes_elect_leaders(c: Cluster) -> None:
    create_assigned(c, "led", [[1, 2], [2, 1]])
    produce(c, 1, "led", 0, 5)
    produce(c, 2, "led", 1, 3)
    d = js(c, "topic", "describe", "led")
    assert [(p["partition"], p["leader"], p["replicas"], p["log_start"], p["log_end"], p["lso"])
            for p in d["partitions"]] == [(0, 1, [1, 2], 0, 5, 5), (1, 2, [2, 1], 0, 3, 3)]
    text = ok(c, "topic", "describe", "led")
    assert text.startswith("Topic: led  Partitions: 2") and "error" not in text

    assert js(c, "topic", "delete-records", "led", "--partition", "0", "--before", "2") == [
        {"topic": "led", "partition": 0, "log_start_offset": 2}]
    assert [p["log_start"] for p in js(c, "topic", "describe", "led")["partitions"]] == [2, 0]

    # every replica's size, from the brokers that hold one (node 3 holds none)
    sizes = js(c, "topic", "sizes", "led")
    assert sorted((r["broker"], r["topic"], r["partition"]) for r in sizes) == [
        (1, "led", 0), (1, "led", 1), (2, "led", 0), (2, "led", 1)]
    assert all(r["size_bytes"] > 0 for r in sizes)

    assert js(c, "topic", "elect-leaders", "led") == [
        {"topic": "led", "partition": 0, "result": "ELECTION_NOT_NEEDED"},
        {"topic": "led", "partition": 1, "result": "ELECTION_NOT_NEEDED"}]


def test_topic_reassign_reassignments_and_cluster_drain_plan(c: Cluster, tmp_path: Any) -> None:
    create_assigned(c, "moved", [[1]])
    produce(c, 1, "moved", 0, 4)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "moved", "partition": 0, "replicas": [1, 2]}]}))
    assert js(c, "topic", "reassign", "--plan", str(plan)) == [{"topic": "moved", "partition": 0, "result": "started"}]
    c.wait_until(lambda: (x := agreed(c, "moved", [1, 2, 3])) is not None and x.partitions[0][2] == (1, 2)
                 and sorted(x.partitions[0][3]) == [1, 2] and js(c, "topic", "reassignments") == [],
                 timeout=30, message="moved on brokers 1 and 2, no reassignment left")
    out = ok(c, "cluster", "drain", "--broker", "1", "--dry-run")
    drain = {(p["topic"], p["partition"]): p["replicas"] for p in json.loads(out)["partitions"]}
    assert drain[("moved", 0)] == [3, 2]
    m = metadata(c.ports[1], "moved")
    assert m is not None and m[1]["moved"].partitions[0][2] == (1, 2)  # a dry run moves nothing


def test_group_list_describe_reset_delete_offsets_delete(c: Cluster) -> None:
    create_assigned(c, "grp", [[1, 2]])
    produce(c, 1, "grp", 0, 6)
    group = coordinated_by(c, 2, GROUP, "g")  # neither the bootstrap broker nor grp-0's leader

    assert js(c, "group", "reset-offsets", group, "--topic", "grp", "--to", "2") == [
        {"topic": "grp", "partition": 0, "offset": 2}]
    assert group in {g["group"] for g in js(c, "group", "list")}
    [d] = js(c, "group", "describe", group)
    assert (d["group"], d["state"]) == (group, "Empty")
    assert d["offsets"] == [{"topic": "grp", "partition": 0, "committed": 2, "end": 6, "lag": 4}]
    assert ["grp", "0", "2", "6", "4"] in [line.split() for line in ok(c, "group", "describe", group).splitlines()]

    assert js(c, "group", "reset-offsets", group, "--topic", "grp", "--to", "latest") == [
        {"topic": "grp", "partition": 0, "offset": 6}]
    assert js(c, "group", "describe", group)[0]["offsets"] == [
        {"topic": "grp", "partition": 0, "committed": 6, "end": 6, "lag": 0}]
    assert js(c, "group", "reset-offsets", group, "--topic", "grp", "--to", "earliest")[0]["offset"] == 0

    assert js(c, "group", "delete-offsets", group, "--topic", "grp") == [
        {"topic": "grp", "partition": 0, "status": "deleted"}]
    assert js(c, "group", "describe", group)[0]["offsets"] == []
    assert ok(c, "group", "delete", group).strip() == f"deleted {group}"
    assert group not in {g["group"] for g in js(c, "group", "list")}


def test_txn_list_describe_find_hanging_abort(c: Cluster) -> None:
    create_assigned(c, "tx", [[1, 2]])
    tid = coordinated_by(c, 2, TXN, "t")
    coord = RawTxn(c.ports[2])
    try:
        # as a client does, until the new coordinator has loaded its partition of __transaction_state
        answers: list[Any] = []
        c.wait_until(lambda: answers.append(coord.init_pid(tid)) or answers[-1].error_code not in COORDINATOR_NOT_READY,
                     timeout=30, message=f"InitProducerId {tid} answered by its coordinator")
        assert answers[-1].error_code == 0, answers[-1]
        pid, epoch = answers[-1].producer_id, answers[-1].producer_epoch
        assert coord.add_partitions(tid, pid, epoch, {"tx": [0]}) == {("tx", 0): 0}
    finally:
        coord.close()
    leader = RawTxn(c.ports[1])
    try:
        assert leader.produce("tx", 0, txn_batch(pid, epoch, 0, 3), tid)[0] == 0
    finally:
        leader.close()

    assert {"transactional_id": tid, "producer_id": pid, "state": "Ongoing",
            "coordinator": f"127.0.0.1:{c.ports[2]}"} in js(c, "txn", "list")
    [d] = js(c, "txn", "describe", tid)
    assert (d["state"], d["producer_id"], d["producer_epoch"], d["partitions"]) == ("Ongoing", pid, epoch, ["tx-0"])
    [p] = js(c, "topic", "describe", "tx")["partitions"]
    assert (p["log_end"], p["lso"]) == (3, 0)  # held by the open transaction
    # its coordinator knows it: long-running, not hanging
    assert js(c, "txn", "find-hanging", "--topic", "tx", "--max-transaction-timeout-ms", "0") == []

    # the abort marker goes to tx-0's leader, through the inter-broker listener it was given
    [a] = js(c, "txn", "abort", "--topic", "tx", "--partition", "0", "--start-offset", "0",
             bootstrap=c[BOOT].inter_broker_bootstrap)
    assert (a["topic"], a["partition"], a["producer_id"], a["aborted"]) == ("tx", 0, pid, True)
    [p] = js(c, "topic", "describe", "tx")["partitions"]
    assert (p["log_end"], p["lso"]) == (4, 4)  # the marker written, the LSO released


def test_cluster_describe(c: Cluster) -> None:
    d = js(c, "cluster", "describe")[0]
    assert d["leader"] in (1, 2, 3) and sorted(v["node"] for v in d["voters"]) == [1, 2, 3]
    assert [v["role"] for v in d["voters"] if v["node"] == d["leader"]] == ["leader"]
    assert {b["node"]: b["state"] for b in d["brokers"]} == {1: "alive", 2: "alive", 3: "alive"}
    text = ok(c, "cluster", "describe")
    assert text.startswith(f"Quorum leader: {d['leader']}  Epoch: {d['epoch']}")
