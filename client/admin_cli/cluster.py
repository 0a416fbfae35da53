"""`ketch cluster describe` and `ketch cluster drain`.

describe: the metadata quorum as its leader sees it (kafka-metadata-quorum describe --status /
--replication): leader, epoch, high watermark, each voter's log end and lag; the registered
brokers, fenced or not; and the partitions that need attention (kafka-topics --describe
--unavailable-partitions / --under-min-isr-partitions): those without a leader and those whose
ISR is below the topic's min.insync.replicas.

drain: move every replica off a broker so it can be decommissioned: the plan replaces it, in every
replica list, by the live broker holding the fewest replicas that is not already one of that
partition's, and runs as `ketch topic reassign` would.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from protocol.clock import SYSTEM_CLOCK

from ..admin import Admin
from ..structs import TopicPartition
from .support import CommandError, print_rows, subcommands
from .topics import Plan, reassign

MIN_ISR = "min.insync.replicas"


async def _attention(admin: Admin) -> list[dict[str, Any]]:
    """Partitions without a leader, or with fewer in sync than the topic's min.insync.replicas."""
    topics = await admin.describe_topics()
    min_isr: dict[str, int] = {}
    for name, entries in (await admin.describe_configs(list(topics), [MIN_ISR]) if topics else {}).items():
        for c in entries if isinstance(entries, list) else []:
            if c.name == MIN_ISR and c.value is not None:
                min_isr[name] = int(c.value)
    out = []
    for name, t in sorted(topics.items()):
        need = min_isr.get(name, 1)
        for p in t.partitions:
            problem = "no leader" if p.leader < 0 else \
                f"ISR {len(p.isr)} below min.insync.replicas {need}" if len(p.isr) < need else None
            if problem:
                out.append({"topic": name, "partition": p.partition, "leader": p.leader,
                            "replicas": ",".join(map(str, p.replicas)), "isr": ",".join(map(str, p.isr)),
                            "problem": problem})
    return out


async def cluster_describe(admin: Admin) -> dict[str, Any]:
    """What `ketch cluster describe --json` prints (also the container's healthcheck)."""
    quorum = await admin.describe_quorum()
    cluster = await admin.describe_cluster()
    brokers = sorted([(b, "alive") for b in cluster.brokers] + [(b, "fenced") for b in cluster.fenced_brokers],
                     key=lambda x: x[0].node_id)
    now = SYSTEM_CLOCK.now_ms()
    return {
        "leader": quorum.leader_id, "epoch": quorum.leader_epoch, "high_watermark": quorum.high_watermark,
        "voters": [{"node": v.node_id, "log_end_offset": v.log_end_offset,
                    "lag": max(quorum.high_watermark - v.log_end_offset, 0),
                    "last_fetch_ms_ago": now - v.last_fetch_timestamp if v.last_fetch_timestamp >= 0 else -1,
                    "role": "leader" if v.node_id == quorum.leader_id else "follower"} for v in quorum.voters],
        "brokers": [{"node": b.node_id, "host": b.host, "port": b.port, "rack": b.rack, "state": state}
                    for b, state in brokers],
        "partitions_needing_attention": await _attention(admin),
    }


async def _describe(admin: Admin, args: argparse.Namespace) -> None:
    d = await cluster_describe(admin)
    if args.json:
        print_rows([d], True)
        return
    print(f"Quorum leader: {d['leader']}  Epoch: {d['epoch']}  High watermark: {d['high_watermark']}")
    print_rows(d["voters"], False)
    print()
    print_rows(d["brokers"], False)
    print()
    if d["partitions_needing_attention"]:
        print_rows(d["partitions_needing_attention"], False)
    else:
        print("Every partition has a leader and at least min.insync.replicas in sync.")


async def drain_plan(admin: Admin, broker: int) -> Plan:
    """Every partition with a replica on `broker`: that replica replaced by a live broker that is
    not already one of its replicas (the one with the fewest replicas so far, spreading them)."""
    topics = await admin.describe_topics()
    live = sorted(b.node_id for b in (await admin.describe_cluster()).brokers if b.node_id != broker)
    load = {b: 0 for b in live}
    for t in topics.values():
        for p in t.partitions:
            for r in p.replicas:
                if r in load:
                    load[r] += 1
    plan: Plan = {}
    for name, t in sorted(topics.items()):
        for p in t.partitions:
            if broker not in p.replicas:
                continue
            spare = sorted((b for b in live if b not in p.replicas), key=lambda b: (load[b], b))
            if not spare:
                raise CommandError(f"{name}-{p.partition} has a replica on every other broker: nowhere to move it")
            load[spare[0]] += 1
            plan[TopicPartition(name, p.partition)] = [spare[0] if r == broker else r for r in p.replicas]
    return plan


async def _drain(admin: Admin, args: argparse.Namespace) -> None:
    plan = await drain_plan(admin, args.broker)
    if args.dry_run:
        print(json.dumps({"version": 1, "partitions": [{"topic": tp.topic, "partition": tp.partition, "replicas": r}
                                                       for tp, r in plan.items()]}, indent=2))
    elif plan:
        await reassign(admin, plan, args.json)
    else:
        print_rows([], args.json)


def add_parsers(csub: Any, common: argparse.ArgumentParser) -> None:
    action = subcommands(csub, common)
    action("describe", _describe, help="the quorum leader, epoch, voters and their lag")
    dr = action("drain", _drain, help="move every replica off a broker (to decommission it)")
    dr.add_argument("--broker", type=int, required=True)
    dr.add_argument("--dry-run", action="store_true", help="print the plan, move nothing")
