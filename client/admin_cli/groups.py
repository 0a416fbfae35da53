"""`ketch group ...`: list, describe, delete consumer groups, reset or delete their committed
offsets (kafka-consumer-groups). A group's offsets are its coordinator's; the end offsets they are
compared with are each partition leader's."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..admin import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Admin
from ..errors import KafkaClientError
from ..structs import TopicPartition
from .support import CommandError, fail_on, print_rows, subcommands
from .topics import partitions_of


async def _list(admin: Admin, args: argparse.Namespace) -> None:
    print_rows([{"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type}
                for g in sorted(await admin.list_groups(), key=lambda g: g.group_id)], args.json)


async def _ends(admin: Admin, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """High watermarks of those of `tps` that exist and have a leader (a group keeps the offsets
    of a deleted topic)."""
    topics = await admin.describe_topics()
    led = [tp for tp in tps if tp.topic in topics
           and any(p.partition == tp.partition and p.leader >= 0 for p in topics[tp.topic].partitions)]
    return await admin.list_offsets(led, LATEST_TIMESTAMP)


async def _describe(admin: Admin, args: argparse.Namespace) -> None:
    try:
        g = (await admin.describe_groups([args.group]))[args.group]
        committed = await admin.list_group_offsets(args.group)
    except KafkaClientError as e:
        raise CommandError(f"describing {args.group!r}: {e}") from None
    ends = await _ends(admin, sorted(committed))
    def parts(tps: tuple[TopicPartition, ...]) -> str:
        return ",".join(f"{tp.topic}-{tp.partition}" for tp in tps)

    consumer = g.group_type == "consumer"
    d: dict[str, Any] = {
        "group": g.group_id, "type": g.group_type, "state": g.state, "protocol_type": g.protocol_type,
        "protocol": g.protocol,
        # a consumer group's (KIP-848) epochs; the member epoch and target show where a rebalance stands
        **({"group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch} if consumer else {}),
        "members": [{"member_id": m.member_id, "instance_id": m.group_instance_id, "client_id": m.client_id,
                     "host": m.client_host,
                     **({"epoch": m.member_epoch} if consumer else {}),
                     "assignment": parts(m.assignment),
                     **({"target": parts(m.target_assignment)} if consumer else {})} for m in g.members],
        # end and lag -1: unknown (the partition is gone or has no leader)
        "offsets": [{"topic": tp.topic, "partition": tp.partition, "committed": off, "end": ends.get(tp, -1),
                     "lag": max(ends[tp] - off, 0) if tp in ends else -1} for tp, off in sorted(committed.items())],
    }
    if args.json:
        print_rows([d], True)
        return
    if consumer:
        print(f"group {d['group']}  type consumer  state {d['state']}  assignor {d['protocol']}  "
              f"epoch {d['group_epoch']}  assignment epoch {d['assignment_epoch']}")
    else:
        print(f"group {d['group']}  type classic  state {d['state']}  protocol {d['protocol_type']}/{d['protocol']}")
    print_rows(d["members"], False)
    print_rows(d["offsets"], False)


async def _delete(admin: Admin, args: argparse.Namespace) -> None:
    fail_on(f"deleting {args.group!r}", (await admin.delete_groups([args.group])).get(args.group))
    print(f"deleted {args.group}")


async def _reset_offsets(admin: Admin, args: argparse.Namespace) -> None:
    """Move a group's committed offsets; the group must have no active members (Kafka's rule)."""
    tps = await partitions_of(admin, args.topic)
    if args.to in ("earliest", "latest"):
        targets = await admin.list_offsets(tps, EARLIEST_TIMESTAMP if args.to == "earliest" else LATEST_TIMESTAMP)
    else:
        try:
            targets = {tp: int(args.to) for tp in tps}
        except ValueError:
            raise CommandError(f"--to {args.to!r}: expected earliest, latest or an offset") from None
    for tp, err in sorted((await admin.alter_group_offsets(args.group, targets)).items()):
        fail_on(f"resetting {tp.topic}-{tp.partition}", err)
    print_rows([{"topic": tp.topic, "partition": tp.partition, "offset": targets[tp]} for tp in tps], args.json)


async def _delete_offsets(admin: Admin, args: argparse.Namespace) -> int:
    """Drop committed offsets (kafka-consumer-groups --delete-offsets): the coordinator refuses
    those of topics the group's members still subscribe to. No partitions given: every partition
    of the topic."""
    tps = [TopicPartition(args.topic, p) for p in args.partitions] or await partitions_of(admin, args.topic)
    try:
        result = await admin.delete_group_offsets(args.group, tps)
    except KafkaClientError as e:
        raise CommandError(f"deleting offsets of {args.group!r}: {e}") from None
    rows = [{"topic": tp.topic, "partition": tp.partition,
             "status": "deleted" if err is None else err.code.name if err.code is not None else str(err)}
            for tp, err in sorted(result.items())]
    print_rows(rows, args.json)
    failed = [f"{r['topic']}-{r['partition']}: {r['status']}" for r in rows if r["status"] != "deleted"]
    if failed:
        print(f"error: offsets kept for {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    g = sub.add_parser("group", help="list, describe, delete consumer groups, reset or delete their offsets")
    gsub = g.add_subparsers(dest="action", required=True)
    action = subcommands(gsub, common)

    action("list", _list)
    action("describe", _describe).add_argument("group")
    action("delete", _delete).add_argument("group")
    gr = action("reset-offsets", _reset_offsets)
    gr.add_argument("group")
    gr.add_argument("--topic", required=True)
    gr.add_argument("--to", required=True, help="earliest, latest, or an offset")
    go = action("delete-offsets", _delete_offsets, help="drop committed offsets of a topic")
    go.add_argument("group")
    go.add_argument("--topic", required=True)
    go.add_argument("--partition", type=int, action="append", default=[], dest="partitions",
                    help="repeatable; default: every partition of the topic")
