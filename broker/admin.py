"""`ketch topic ...` and `ketch group ...`: administration over the wire, like Kafka's scripts.

Each command opens one connection (broker/wire.py) to the bootstrap broker, or to the group's
coordinator for group commands, and prints a plain table or JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from protocol.errors import ErrorCode
from protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest

from .wire import BrokerConnection, WireError


class AdminError(Exception):
    pass


def _split(hostport: str) -> tuple[str, int]:
    host, port = hostport.rsplit(":", 1)
    return host, int(port)


def _check(code: int, what: str) -> None:
    if code:
        raise AdminError(f"{what}: {ErrorCode(code).name}")


async def _connect(bootstrap: str) -> BrokerConnection:
    host, port = _split(bootstrap)
    return await BrokerConnection.connect(host, port, client_id="ketch-admin")


async def _coordinator(bootstrap: str, group: str) -> BrokerConnection:
    conn = await _connect(bootstrap)
    try:
        resp = await conn.request(FindCoordinatorRequest(key=group, key_type=0), version=1)
    finally:
        conn.close()
    _check(resp.error_code, f"finding the coordinator of {group!r}")
    return await BrokerConnection.connect(resp.host, resp.port, client_id="ketch-admin")


def _print(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        json.dump(rows, sys.stdout, indent=2, default=str)
        print()
        return
    if not rows:
        print("(none)")
        return
    cols = list(rows[0])
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in cols]
    print("  ".join(c.upper().ljust(w) for c, w in zip(cols, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths, strict=True)))


# ---- topics ----------------------------------------------------------------------------------------

async def topic_list(bootstrap: str) -> list[dict[str, Any]]:
    conn = await _connect(bootstrap)
    try:
        md = await conn.request(MetadataRequest(topics=None), version=4)
    finally:
        conn.close()
    return [{"topic": t.name, "partitions": len(t.partitions), "internal": t.is_internal}
            for t in sorted(md.topics, key=lambda t: t.name)]


async def topic_create(bootstrap: str, name: str, partitions: int, configs: dict[str, str]) -> None:
    conn = await _connect(bootstrap)
    try:
        resp = await conn.request(CreateTopicsRequest(topics=[CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=-1,
            configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])], timeout_ms=30000),
            version=4)
    finally:
        conn.close()
    _check(resp.topics[0].error_code, f"creating {name!r} ({resp.topics[0].error_message or ''})")


async def topic_delete(bootstrap: str, name: str) -> None:
    conn = await _connect(bootstrap)
    try:
        resp = await conn.request(DeleteTopicsRequest(topic_names=[name], timeout_ms=30000), version=4)
    finally:
        conn.close()
    _check(resp.responses[0].error_code, f"deleting {name!r}")


# ---- groups ----------------------------------------------------------------------------------------

async def group_list(bootstrap: str) -> list[dict[str, Any]]:
    conn = await _connect(bootstrap)
    try:
        resp = await conn.request(ListGroupsRequest(), version=4)
    finally:
        conn.close()
    _check(resp.error_code, "listing groups")
    return [{"group": g.group_id, "state": g.group_state, "protocol_type": g.protocol_type}
            for g in sorted(resp.groups, key=lambda g: g.group_id)]


async def _committed(conn: BrokerConnection, group: str) -> dict[tuple[str, int], int]:
    resp = await conn.request(OffsetFetchRequest(group_id=group, topics=None), version=7)
    _check(resp.error_code, f"fetching offsets of {group!r}")
    return {(t.name, p.partition_index): p.committed_offset
            for t in resp.topics for p in t.partitions if p.committed_offset >= 0}


async def _end_offsets(conn: BrokerConnection, parts: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
    by_topic: dict[str, list[int]] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    resp = await conn.request(ListOffsetsRequest(replica_id=-1, topics=[
        ListOffsetsTopic(name=t, partitions=[ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in ps])
        for t, ps in by_topic.items()]), version=1)
    return {(t.name, p.partition_index): p.offset for t in resp.topics for p in t.partitions}


async def group_describe(bootstrap: str, group: str) -> dict[str, Any]:
    conn = await _coordinator(bootstrap, group)
    try:
        resp = await conn.request(DescribeGroupsRequest(groups=[group]), version=4)
        g = resp.groups[0]
        _check(g.error_code, f"describing {group!r}")
        committed = await _committed(conn, group)
        ends = await _end_offsets(conn, sorted(committed), -1) if committed else {}
    finally:
        conn.close()
    return {
        "group": g.group_id, "state": g.group_state, "protocol_type": g.protocol_type, "protocol": g.protocol_data,
        "members": [{"member_id": m.member_id, "instance_id": m.group_instance_id, "client_id": m.client_id,
                     "host": m.client_host} for m in g.members],
        "offsets": [{"topic": t, "partition": p, "committed": off, "end": ends.get((t, p), -1),
                     "lag": max(ends.get((t, p), off) - off, 0)} for (t, p), off in sorted(committed.items())],
    }


async def group_delete(bootstrap: str, group: str) -> None:
    conn = await _coordinator(bootstrap, group)
    try:
        resp = await conn.request(DeleteGroupsRequest(groups_names=[group]), version=1)
    finally:
        conn.close()
    _check(resp.results[0].error_code, f"deleting {group!r}")


async def group_reset_offsets(bootstrap: str, group: str, topic: str, to: str) -> list[dict[str, Any]]:
    """Move a group's committed offsets; the group must have no active members (Kafka's rule)."""
    conn = await _coordinator(bootstrap, group)
    try:
        md = await conn.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                                allow_auto_topic_creation=False), version=4)
        _check(md.topics[0].error_code, f"topic {topic!r}")
        parts = [(topic, p.partition_index) for p in md.topics[0].partitions]
        if to in ("earliest", "latest"):
            targets = await _end_offsets(conn, parts, -2 if to == "earliest" else -1)
        else:
            targets = {tp: int(to) for tp in parts}
        resp = await conn.request(OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="",
            topics=[OffsetCommitRequestTopic(name=topic, partitions=[
                OffsetCommitRequestPartition(partition_index=p, committed_offset=targets[(topic, p)],
                                             committed_metadata="")
                for _, p in parts])]), version=7)
    finally:
        conn.close()
    for t in resp.topics:
        for p in t.partitions:
            _check(p.error_code, f"resetting {t.name}-{p.partition_index}")
    return [{"topic": t, "partition": p, "offset": targets[(t, p)]} for t, p in parts]


# ---- argument parsing ------------------------------------------------------------------------------

def add_parsers(sub: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap", default="localhost:9092", help="HOST:PORT of a broker")
    common.add_argument("--json", action="store_true", help="print JSON")
    t = sub.add_parser("topic", help="list, create or delete topics")
    tsub = t.add_subparsers(dest="action", required=True)
    tsub.add_parser("list", parents=[common])
    c = tsub.add_parser("create", parents=[common])
    c.add_argument("name")
    c.add_argument("--partitions", type=int, default=-1)
    c.add_argument("--config", action="append", default=[], help="KEY=VALUE, repeatable")
    d = tsub.add_parser("delete", parents=[common])
    d.add_argument("name")
    t.set_defaults(func=_run_topic)

    g = sub.add_parser("group", help="list, describe, delete consumer groups or reset their offsets")
    gsub = g.add_subparsers(dest="action", required=True)
    gsub.add_parser("list", parents=[common])
    gd = gsub.add_parser("describe", parents=[common])
    gd.add_argument("group")
    gx = gsub.add_parser("delete", parents=[common])
    gx.add_argument("group")
    gr = gsub.add_parser("reset-offsets", parents=[common])
    gr.add_argument("group")
    gr.add_argument("--topic", required=True)
    gr.add_argument("--to", required=True, help="earliest, latest, or an offset")
    g.set_defaults(func=_run_group)


def _run(coro: Any) -> Any:
    try:
        return asyncio.run(coro)
    except (AdminError, WireError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


def _run_topic(args: argparse.Namespace) -> int:
    if args.action == "list":
        _print(_run(topic_list(args.bootstrap)), args.json)
    elif args.action == "create":
        configs = dict(kv.split("=", 1) for kv in args.config)
        _run(topic_create(args.bootstrap, args.name, args.partitions, configs))
        print(f"created {args.name}")
    elif args.action == "delete":
        _run(topic_delete(args.bootstrap, args.name))
        print(f"deleted {args.name}")
    return 0


def _run_group(args: argparse.Namespace) -> int:
    if args.action == "list":
        _print(_run(group_list(args.bootstrap)), args.json)
    elif args.action == "describe":
        d = _run(group_describe(args.bootstrap, args.group))
        if args.json:
            _print([d], True)
        else:
            print(f"group {d['group']}  state {d['state']}  protocol {d['protocol_type']}/{d['protocol']}")
            _print(d["members"], False)
            _print(d["offsets"], False)
    elif args.action == "delete":
        _run(group_delete(args.bootstrap, args.group))
        print(f"deleted {args.group}")
    elif args.action == "reset-offsets":
        _print(_run(group_reset_offsets(args.bootstrap, args.group, args.topic, args.to)), args.json)
    return 0
