"""`ketch topic ...`: list, create, delete, add partitions, show and alter configs (kafka-topics,
kafka-configs); describe with each partition's offsets, delete records, sizes on disk
(kafka-delete-records, kafka-log-dirs); elect leaders (kafka-leader-election); move replicas
(kafka-reassign-partitions: a plan is its JSON,
{"version": 1, "partitions": [{"topic": T, "partition": P, "replicas": [B, ...]}, ...]})."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..admin import (
    CONFIG_DELETE,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    Admin,
    AlterConfigOp,
    ConfigEntry,
    NewTopic,
    TopicDescription,
)
from ..errors import KafkaClientError
from ..structs import TopicPartition
from .support import CommandError, fail_on, pairs, print_rows, subcommands

SOURCES = {1: "topic", 4: "broker", 5: "default"}  # Kafka's ConfigSource ids
SOURCE_TOPIC = 1

Plan = dict[TopicPartition, list[int] | None]


async def _list(admin: Admin, args: argparse.Namespace) -> None:
    topics = await admin.describe_topics()
    print_rows([{"topic": n, "partitions": len(t.partitions), "internal": t.internal}
                for n, t in sorted(topics.items())], args.json)


async def _create(admin: Admin, args: argparse.Namespace) -> None:
    result = await admin.create_topics([NewTopic(args.name, args.partitions, args.replication_factor,
                                                 pairs(args.config))])
    fail_on(f"creating {args.name!r}", result.get(args.name))
    print(f"created {args.name}")


async def _delete(admin: Admin, args: argparse.Namespace) -> None:
    fail_on(f"deleting {args.name!r}", (await admin.delete_topics([args.name])).get(args.name))
    print(f"deleted {args.name}")


async def _add_partitions(admin: Admin, args: argparse.Namespace) -> None:
    result = await admin.create_partitions({args.name: args.partitions}, validate_only=args.validate_only)
    fail_on(f"adding partitions to {args.name!r}", result.get(args.name))
    print(f"{'valid' if args.validate_only else 'now'}: {args.name} with {args.partitions} partitions")


async def _alter_config(admin: Admin, args: argparse.Namespace) -> None:
    """IncrementalAlterConfigs: only the named keys change, as kafka-configs --alter does."""
    ops = [AlterConfigOp(k, v) for k, v in pairs(args.sets).items()]
    ops += [AlterConfigOp(k, None, CONFIG_DELETE) for k in args.deletes]
    if not ops:
        raise CommandError("nothing to change: give --set KEY=VALUE and/or --delete KEY")
    result = await admin.incremental_alter_configs({args.name: ops}, validate_only=args.validate_only)
    fail_on(f"altering configs of {args.name!r}", result.get(args.name))
    print(f"{'valid' if args.validate_only else 'altered'}: {args.name}")


async def _configs_of(admin: Admin, name: str) -> list[ConfigEntry]:
    entries = (await admin.describe_configs([name]))[name]
    if isinstance(entries, KafkaClientError):
        raise CommandError(f"describing configs of {name!r}: {entries}")
    return entries


async def _configs(admin: Admin, args: argparse.Namespace) -> None:
    print_rows([{"config": c.name, "value": c.value, "source": SOURCES.get(c.source, str(c.source))}
                for c in await _configs_of(admin, args.name)], args.json)


async def topic_of(admin: Admin, name: str) -> TopicDescription:
    try:
        return (await admin.describe_topics([name]))[name]
    except KafkaClientError as e:
        raise CommandError(f"topic {name!r}: {e}") from None


async def partitions_of(admin: Admin, name: str) -> list[TopicPartition]:
    return [TopicPartition(name, p.partition) for p in (await topic_of(admin, name)).partitions]


async def _describe(admin: Admin, args: argparse.Namespace) -> None:
    """Per partition: leader, replicas, ISR, log start, log end (high watermark) and last stable
    offset, each asked of the partition's leader (-1 while it has none); and the configs set on
    the topic."""
    t = await topic_of(admin, args.name)
    led = [TopicPartition(args.name, p.partition) for p in t.partitions if p.leader >= 0]
    start = await admin.list_offsets(led, EARLIEST_TIMESTAMP)
    end = await admin.list_offsets(led, LATEST_TIMESTAMP)
    lso = await admin.list_offsets(led, LATEST_TIMESTAMP, read_committed=True)
    configs = await _configs_of(admin, args.name)
    d = {
        "topic": args.name, "internal": t.internal,
        "partitions": [{"partition": p.partition, "leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isr),
                        "log_start": start.get(tp, -1), "log_end": end.get(tp, -1), "lso": lso.get(tp, -1)}
                       for p in t.partitions for tp in [TopicPartition(args.name, p.partition)]],
        "configs": {c.name: c.value for c in configs if c.source == SOURCE_TOPIC},
    }
    if args.json:
        print(json.dumps(d, indent=2))
        return
    shown = ", ".join(f"{k}={v}" for k, v in sorted(d["configs"].items())) or "(defaults)"
    print(f"Topic: {d['topic']}  Partitions: {len(d['partitions'])}  Internal: {d['internal']}  Configs: {shown}")
    print_rows([{**p, "replicas": ",".join(map(str, p["replicas"])), "isr": ",".join(map(str, p["isr"]))}
                for p in d["partitions"]], False)


async def _delete_records(admin: Admin, args: argparse.Namespace) -> None:
    """Records below --before (-1: the high watermark) become unreadable; the rows give each
    partition's new log start."""
    tps = [TopicPartition(args.name, p) for p in args.partitions] or await partitions_of(admin, args.name)
    result = await admin.delete_records({tp: args.before for tp in tps})
    rows = []
    for tp, low in sorted(result.items()):
        if isinstance(low, KafkaClientError):
            raise CommandError(f"deleting records of {tp.topic}-{tp.partition}: {low}")
        rows.append({"topic": tp.topic, "partition": tp.partition, "log_start_offset": low})
    print_rows(rows, args.json)


async def _sizes(admin: Admin, args: argparse.Namespace) -> None:
    """Bytes on disk of every replica (DescribeLogDirs on every broker), every topic's or one's."""
    try:
        dirs = await admin.describe_log_dirs(None if args.name is None else [args.name])
    except KafkaClientError as e:
        raise CommandError(f"describing log dirs: {e}") from None
    rows = []
    for d in dirs:
        fail_on(f"log dir {d.path} of broker {d.broker_id}", d.error)
        rows += [{"broker": d.broker_id, "topic": tp.topic, "partition": tp.partition, "size_bytes": size,
                  "offset_lag": d.offset_lags.get(tp, 0), "log_dir": d.path} for tp, size in d.partition_sizes.items()]
    print_rows(sorted(rows, key=lambda r: (r["topic"], r["partition"], r["broker"])), args.json)


async def _elect_leaders(admin: Admin, args: argparse.Namespace) -> None:
    """ElectLeaders: per partition, elected or why not."""
    wanted = None
    if args.name is not None:
        wanted = [TopicPartition(args.name, p) for p in args.partitions] or await partitions_of(admin, args.name)
    result = await admin.elect_leaders(wanted, unclean=args.unclean)
    print_rows([{"topic": tp.topic, "partition": tp.partition,
                 "result": "elected" if err is None else err.code.name if err.code is not None else str(err)}
                for tp, err in sorted(result.items())], args.json)


def load_plan(path: str) -> Plan:
    try:
        data = json.loads(Path(path).read_text())
        return {TopicPartition(p["topic"], int(p["partition"])):
                None if p.get("replicas") is None else [int(b) for b in p["replicas"]] for p in data["partitions"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CommandError(f"reading the plan {path}: {e}") from None


async def reassign(admin: Admin, plan: Plan, as_json: bool) -> None:
    result = await admin.alter_partition_reassignments(plan)
    print_rows([{"topic": tp.topic, "partition": tp.partition, "result": "started" if err is None else str(err)}
                for tp, err in sorted(result.items())], as_json)


async def _reassign(admin: Admin, args: argparse.Namespace) -> None:
    plan = load_plan(args.plan)
    await reassign(admin, {tp: None for tp in plan} if args.cancel else plan, args.json)


async def _reassignments(admin: Admin, args: argparse.Namespace) -> None:
    print_rows([{"topic": tp.topic, "partition": tp.partition, "replicas": ",".join(map(str, r.replicas)),
                 "adding": ",".join(map(str, r.adding)), "removing": ",".join(map(str, r.removing))}
                for tp, r in sorted((await admin.list_partition_reassignments()).items())], args.json)


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    t = sub.add_parser("topic", help="list, create, delete topics, add partitions, show or alter configs, "
                                     "delete records, show sizes, elect leaders, move replicas")
    tsub = t.add_subparsers(dest="action", required=True)
    action = subcommands(tsub, common)

    action("list", _list)
    c = action("create", _create)
    c.add_argument("name")
    c.add_argument("--partitions", type=int, default=-1)
    c.add_argument("--replication-factor", type=int, default=-1, help="replicas per partition (at most the live brokers)")
    c.add_argument("--config", action="append", default=[], help="KEY=VALUE, repeatable")
    action("delete", _delete).add_argument("name")
    ap = action("add-partitions", _add_partitions, help="raise the partition count")
    ap.add_argument("name")
    ap.add_argument("--partitions", type=int, required=True, help="the new total (larger than now)")
    ap.add_argument("--validate-only", action="store_true", help="check, change nothing")
    ac = action("alter-config", _alter_config, help="set or delete topic config overrides")
    ac.add_argument("name")
    ac.add_argument("--set", action="append", default=[], dest="sets", metavar="KEY=VALUE", help="repeatable")
    ac.add_argument("--delete", action="append", default=[], dest="deletes", metavar="KEY",
                    help="back to the default; repeatable")
    ac.add_argument("--validate-only", action="store_true", help="check, change nothing")
    action("configs", _configs, help="effective configs and where each comes from").add_argument("name")
    action("describe", _describe,
           help="partitions with leader, replicas, ISR, log start/end, LSO; configs set on the topic").add_argument("name")
    dr = action("delete-records", _delete_records, help="make records below an offset unreadable (moves the log start)")
    dr.add_argument("name")
    dr.add_argument("--before", type=int, required=True, metavar="OFFSET",
                    help="first offset to keep; -1 means the high watermark (delete everything)")
    dr.add_argument("--partition", action="append", type=int, default=[], dest="partitions", metavar="P",
                    help="repeatable (default: every partition)")
    action("sizes", _sizes, help="bytes on disk of every replica, per broker").add_argument(
        "name", nargs="?", help="one topic (default: all)")
    el = action("elect-leaders", _elect_leaders,
                help="give partitions back to their preferred replica, or (--unclean) to any live one")
    el.add_argument("name", nargs="?", help="one topic (default: every partition of every topic)")
    el.add_argument("--partition", action="append", type=int, default=[], dest="partitions", metavar="P",
                    help="repeatable (default: every partition of the topic)")
    el.add_argument("--unclean", action="store_true",
                    help="for partitions without a live in-sync replica: any live replica (may lose data)")
    ra = action("reassign", _reassign, help="move replicas as a plan file says (kafka-reassign-partitions)")
    ra.add_argument("--plan", required=True, help='JSON: {"version":1,"partitions":[{"topic","partition","replicas"}]}')
    ra.add_argument("--cancel", action="store_true", help="cancel the plan's partitions' reassignments instead")
    action("reassignments", _reassignments, help="reassignments under way")
