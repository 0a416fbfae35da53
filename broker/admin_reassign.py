"""`ketch topic reassign`, `ketch topic reassignments` and `ketch cluster drain`: moving replicas
between brokers (kafka-reassign-partitions). A plan is kafka-reassign-partitions' JSON:
{"version": 1, "partitions": [{"topic": T, "partition": P, "replicas": [B, ...]}, ...]}.
Draining a broker writes and runs the plan that replaces it, in every replica list, by the live
broker holding the fewest replicas that is not already one of that partition's; once the moves
are done it holds no replica and can be decommissioned."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from protocol.errors import ErrorCode
from protocol.messages import partition_reassignments as pr
from protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse

from .cli_support import AdminError, check, connect, print_rows, run_command


def load_plan(path: str) -> list[tuple[str, int, list[int] | None]]:
    try:
        data = json.loads(Path(path).read_text())
        return [(p["topic"], int(p["partition"]), None if p.get("replicas") is None else [int(b) for b in p["replicas"]])
                for p in data["partitions"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise AdminError(f"reading the plan {path}: {e}") from None


async def reassign(bootstrap: str, plan: list[tuple[str, int, list[int] | None]]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[pr.ReassignablePartition]] = {}
    for topic, partition, replicas in plan:
        by_topic.setdefault(topic, []).append(pr.ReassignablePartition(partition_index=partition, replicas=replicas))
    conn = await connect(bootstrap)
    try:
        resp = await conn.request(pr.AlterPartitionReassignmentsRequest(
            timeout_ms=30000, topics=[pr.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()]))
    finally:
        conn.close()
    check(resp.error_code, f"reassigning ({resp.error_message or ''})")
    rows = [{"topic": r.name, "partition": p.partition_index,
             "result": "started" if p.error_code == 0 else f"{ErrorCode(p.error_code).name}: {p.error_message or ''}"}
            for r in resp.responses for p in r.partitions]
    return sorted(rows, key=lambda r: (r["topic"], r["partition"]))


async def reassignments(bootstrap: str) -> list[dict[str, Any]]:
    conn = await connect(bootstrap)
    try:
        resp = await conn.request(pr.ListPartitionReassignmentsRequest(timeout_ms=30000, topics=None))
    finally:
        conn.close()
    check(resp.error_code, "listing reassignments")
    return [{"topic": t.name, "partition": p.partition_index, "replicas": ",".join(map(str, p.replicas)),
             "adding": ",".join(map(str, p.adding_replicas)), "removing": ",".join(map(str, p.removing_replicas))}
            for t in resp.topics for p in t.partitions]


async def drain_plan(bootstrap: str, broker: int) -> list[tuple[str, int, list[int] | None]]:
    """Every partition with a replica on `broker`: that replica replaced by a live broker that is
    not already one of its replicas (the one with the fewest replicas so far, spreading them)."""
    conn = await connect(bootstrap)
    try:
        md = await conn.request(MetadataRequest(topics=None, allow_auto_topic_creation=False))
        cluster = await conn.request(DescribeClusterRequest(include_cluster_authorized_operations=False))
    finally:
        conn.close()
    assert isinstance(md, MetadataResponse) and isinstance(cluster, DescribeClusterResponse)
    live = sorted(b.broker_id for b in cluster.brokers if b.broker_id != broker)
    load = {b: 0 for b in live}
    for t in md.topics:
        for p in t.partitions:
            for r in p.replica_nodes:
                if r in load:
                    load[r] += 1
    plan: list[tuple[str, int, list[int] | None]] = []
    for t in sorted(md.topics, key=lambda t: t.name or ""):
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            if broker not in p.replica_nodes:
                continue
            spare = sorted((b for b in live if b not in p.replica_nodes), key=lambda b: (load[b], b))
            if not spare:
                raise AdminError(f"{t.name}-{p.partition_index} has a replica on every other broker: nowhere to move it")
            load[spare[0]] += 1
            plan.append((t.name or "", p.partition_index, [spare[0] if r == broker else r for r in p.replica_nodes]))
    return plan


def add_topic_parsers(tsub: Any, common: argparse.ArgumentParser) -> None:
    ra = tsub.add_parser("reassign", parents=[common], help="move replicas as a plan file says (kafka-reassign-partitions)")
    ra.add_argument("--plan", required=True, help='JSON: {"version":1,"partitions":[{"topic","partition","replicas"}]}')
    ra.add_argument("--cancel", action="store_true", help="cancel the plan's partitions' reassignments instead")
    tsub.add_parser("reassignments", parents=[common], help="reassignments under way")


def add_cluster_parsers(csub: Any, common: argparse.ArgumentParser) -> None:
    dr = csub.add_parser("drain", parents=[common], help="move every replica off a broker (to decommission it)")
    dr.add_argument("--broker", type=int, required=True)
    dr.add_argument("--dry-run", action="store_true", help="print the plan, move nothing")
    dr.set_defaults(func=run_drain)


def run_topic(args: argparse.Namespace) -> None:
    if args.action == "reassign":
        plan = load_plan(args.plan)
        if args.cancel:
            plan = [(t, p, None) for t, p, _ in plan]
        print_rows(run_command(reassign(args.bootstrap, plan)), args.json)
    else:
        print_rows(run_command(reassignments(args.bootstrap)), args.json)


def run_drain(args: argparse.Namespace) -> int:
    plan = run_command(drain_plan(args.bootstrap, args.broker))
    if args.dry_run:
        print(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r}
                                                       for t, p, r in plan]}, indent=2))
        return 0
    print_rows(run_command(reassign(args.bootstrap, plan)) if plan else [], args.json)
    return 0
