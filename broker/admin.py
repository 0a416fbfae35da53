"""`ketch topic ...`, `ketch group ...` and `ketch txn ...`: administration over the wire, like
Kafka's scripts (kafka-topics, kafka-consumer-groups, kafka-transactions).

Each command opens one connection (broker/wire.py) to the bootstrap broker, or to the group's or
transactional id's coordinator, and prints a plain table or JSON.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from protocol.errors import ErrorCode
from protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.describe_producers import DescribeProducersRequest, TopicRequest
from protocol.messages.describe_transactions import DescribeTransactionsRequest
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from protocol.messages.list_transactions import ListTransactionsRequest
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

from . import admin_cluster, admin_logs, admin_reassign
from .cli_support import AdminError, bootstrap_arg, check, connect, coordinator, print_rows, run_command
from .wire import BrokerConnection

# ---- topics ----------------------------------------------------------------------------------------

async def topic_list(bootstrap: str) -> list[dict[str, Any]]:
    conn = await connect(bootstrap)
    try:
        md = await conn.request(MetadataRequest(topics=None), version=4)
    finally:
        conn.close()
    return [{"topic": t.name, "partitions": len(t.partitions), "internal": t.is_internal}
            for t in sorted(md.topics, key=lambda t: t.name)]


async def topic_create(bootstrap: str, name: str, partitions: int, configs: dict[str, str],
                       replication_factor: int = -1) -> None:
    conn = await connect(bootstrap)
    try:
        resp = await conn.request(CreateTopicsRequest(topics=[CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=replication_factor,
            configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])], timeout_ms=30000),
            version=4)
    finally:
        conn.close()
    check(resp.topics[0].error_code, f"creating {name!r} ({resp.topics[0].error_message or ''})")


async def topic_delete(bootstrap: str, name: str) -> None:
    conn = await connect(bootstrap)
    try:
        resp = await conn.request(DeleteTopicsRequest(topic_names=[name], timeout_ms=30000), version=4)
    finally:
        conn.close()
    check(resp.responses[0].error_code, f"deleting {name!r}")


async def topic_add_partitions(bootstrap: str, name: str, partitions: int, validate_only: bool) -> None:
    conn = await connect(bootstrap)
    try:
        resp = await conn.request(CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name=name, count=partitions, assignments=None)], timeout_ms=30000,
            validate_only=validate_only))
    finally:
        conn.close()
    r = resp.results[0]
    check(r.error_code, f"adding partitions to {name!r} ({r.error_message or ''})")


TOPIC_RESOURCE = 2
CONFIG_SET, CONFIG_DELETE = 0, 1


async def topic_alter_config(bootstrap: str, name: str, sets: dict[str, str], deletes: list[str],
                             validate_only: bool) -> None:
    """IncrementalAlterConfigs: only the named keys change, as kafka-configs --alter does."""
    if not sets and not deletes:
        raise AdminError("nothing to change: give --set KEY=VALUE and/or --delete KEY")
    ops = [AlterableConfig(name=k, config_operation=CONFIG_SET, value=v) for k, v in sets.items()]
    ops += [AlterableConfig(name=k, config_operation=CONFIG_DELETE, value=None) for k in deletes]
    conn = await connect(bootstrap)
    try:
        resp = await conn.request(IncrementalAlterConfigsRequest(
            resources=[AlterConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=name, configs=ops)],
            validate_only=validate_only))
    finally:
        conn.close()
    r = resp.responses[0]
    check(r.error_code, f"altering configs of {name!r} ({r.error_message or ''})")


_SOURCES = {1: "topic", 4: "broker", 5: "default"}


async def topic_configs(bootstrap: str, name: str) -> list[dict[str, Any]]:
    conn = await connect(bootstrap)
    try:
        resp = await conn.request(DescribeConfigsRequest(resources=[DescribeConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=name, configuration_keys=None)]), version=1)
    finally:
        conn.close()
    r = resp.results[0]
    check(r.error_code, f"describing configs of {name!r}")
    return [{"config": c.name, "value": c.value, "source": _SOURCES.get(c.config_source, str(c.config_source))}
            for c in r.configs]


# ---- groups ----------------------------------------------------------------------------------------

async def group_list(bootstrap: str) -> list[dict[str, Any]]:
    conn = await connect(bootstrap)
    try:
        resp = await conn.request(ListGroupsRequest(), version=4)
    finally:
        conn.close()
    check(resp.error_code, "listing groups")
    return [{"group": g.group_id, "state": g.group_state, "protocol_type": g.protocol_type}
            for g in sorted(resp.groups, key=lambda g: g.group_id)]


async def _committed(conn: BrokerConnection, group: str) -> dict[tuple[str, int], int]:
    resp = await conn.request(OffsetFetchRequest(group_id=group, topics=None), version=7)
    check(resp.error_code, f"fetching offsets of {group!r}")
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
    conn = await coordinator(bootstrap, group)
    try:
        resp = await conn.request(DescribeGroupsRequest(groups=[group]), version=4)
        g = resp.groups[0]
        check(g.error_code, f"describing {group!r}")
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
    conn = await coordinator(bootstrap, group)
    try:
        resp = await conn.request(DeleteGroupsRequest(groups_names=[group]), version=1)
    finally:
        conn.close()
    check(resp.results[0].error_code, f"deleting {group!r}")


async def group_reset_offsets(bootstrap: str, group: str, topic: str, to: str) -> list[dict[str, Any]]:
    """Move a group's committed offsets; the group must have no active members (Kafka's rule)."""
    conn = await coordinator(bootstrap, group)
    try:
        md = await conn.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                                allow_auto_topic_creation=False), version=4)
        check(md.topics[0].error_code, f"topic {topic!r}")
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
            check(p.error_code, f"resetting {t.name}-{p.partition_index}")
    return [{"topic": t, "partition": p, "offset": targets[(t, p)]} for t, p in parts]


async def group_delete_offsets(bootstrap: str, group: str, topic: str, partitions: list[int]) -> list[dict[str, Any]]:
    """Drop committed offsets (kafka-consumer-groups --delete-offsets): the broker refuses those of
    topics the group's members still subscribe to. No partitions given: every partition of the topic."""
    conn = await coordinator(bootstrap, group)
    try:
        if not partitions:
            md = await conn.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                                    allow_auto_topic_creation=False), version=4)
            check(md.topics[0].error_code, f"topic {topic!r}")
            partitions = sorted(p.partition_index for p in md.topics[0].partitions)
        resp = await conn.request(OffsetDeleteRequest(group_id=group, topics=[OffsetDeleteRequestTopic(
            name=topic, partitions=[OffsetDeleteRequestPartition(partition_index=p) for p in partitions])]), version=0)
    finally:
        conn.close()
    check(resp.error_code, f"deleting offsets of {group!r}")
    return [{"topic": t.name, "partition": p.partition_index,
             "status": ErrorCode(p.error_code).name if p.error_code else "deleted"}
            for t in resp.topics for p in t.partitions]


# ---- transactions ----------------------------------------------------------------------------------

async def _brokers(bootstrap: str) -> list[tuple[str, int]]:
    conn = await connect(bootstrap)
    try:
        md = await conn.request(MetadataRequest(topics=[]), version=4)
    finally:
        conn.close()
    return [(b.host, b.port) for b in md.brokers]


async def txn_list(bootstrap: str, states: list[str], producer_ids: list[int],
                   duration_ms: int) -> list[dict[str, Any]]:
    """Every coordinator's transactional ids (each broker coordinates its own share)."""
    rows = []
    for host, port in await _brokers(bootstrap):
        conn = await BrokerConnection.connect(host, port, client_id="ketch-admin")
        try:
            resp = await conn.request(ListTransactionsRequest(state_filters=states, producer_id_filters=producer_ids,
                                                              duration_filter=duration_ms), version=1)
        finally:
            conn.close()
        check(resp.error_code, "listing transactions")
        if resp.unknown_state_filters:
            raise AdminError(f"unknown states: {', '.join(resp.unknown_state_filters)}")
        rows += [{"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                  "state": t.transaction_state, "coordinator": f"{host}:{port}"} for t in resp.transaction_states]
    return sorted(rows, key=lambda r: r["transactional_id"])


async def txn_describe(bootstrap: str, tid: str) -> dict[str, Any]:
    conn = await coordinator(bootstrap, tid, key_type=1)
    try:
        resp = await conn.request(DescribeTransactionsRequest(transactional_ids=[tid]), version=0)
    finally:
        conn.close()
    t = resp.transaction_states[0]
    check(t.error_code, f"describing {tid!r}")
    start = t.transaction_start_time_ms
    return {"transactional_id": tid, "state": t.transaction_state, "producer_id": t.producer_id,
            "producer_epoch": t.producer_epoch, "timeout_ms": t.transaction_timeout_ms, "start_ms": start,
            "duration_ms": int(time.time() * 1000) - start if start >= 0 and t.transaction_state == "Ongoing" else -1,
            "partitions": [f"{d.topic}-{p}" for d in t.topics for p in d.partitions]}


async def _open_transactions(conn: BrokerConnection, topic: str, partitions: list[int]) -> list[dict[str, Any]]:
    resp = await conn.request(DescribeProducersRequest(topics=[TopicRequest(name=topic, partition_indexes=partitions)]),
                              version=0)
    out = []
    for t in resp.topics:
        for p in t.partitions:
            check(p.error_code, f"describing producers of {t.name}-{p.partition_index}")
            out += [{"topic": t.name, "partition": p.partition_index, "producer_id": s.producer_id,
                     "producer_epoch": s.producer_epoch, "coordinator_epoch": s.coordinator_epoch,
                     "start_offset": s.current_txn_start_offset, "last_timestamp": s.last_timestamp}
                    for s in p.active_producers if s.current_txn_start_offset >= 0]
    return out


async def txn_find_hanging(bootstrap: str, topic: str | None, max_timeout_ms: int) -> list[dict[str, Any]]:
    """Open transactions in partitions that their coordinator does not know as ongoing there
    (KIP-664): older than the longest allowed transaction, and either no coordinator has the
    producer id, or its transaction does not include the partition (or has a newer epoch).
    Producer state lives with each partition's leader, so each leader is asked for its own."""
    conn = await connect(bootstrap)
    try:
        md = await conn.request(MetadataRequest(topics=None if topic is None else [MetadataRequestTopic(name=topic)]),
                                version=4)
    finally:
        conn.close()
    addresses = {b.node_id: (b.host, b.port) for b in md.brokers}
    by_leader: dict[int, list[tuple[str, list[int]]]] = {}
    for t in md.topics:
        check(t.error_code, f"topic {t.name!r}")
        per_leader: dict[int, list[int]] = {}
        for p in t.partitions:
            if p.leader_id not in addresses:
                raise AdminError(f"{t.name}-{p.partition_index} has no leader right now; try again")
            per_leader.setdefault(p.leader_id, []).append(p.partition_index)
        for leader, parts in per_leader.items():
            by_leader.setdefault(leader, []).append((t.name, parts))
    candidates = []
    now = int(time.time() * 1000)
    for leader, topics in sorted(by_leader.items()):
        lc = await BrokerConnection.connect(*addresses[leader], client_id="ketch-admin")
        try:
            for name, parts in topics:
                for row in await _open_transactions(lc, name, parts):
                    if now - row["last_timestamp"] >= max_timeout_ms:
                        candidates.append(row)
        finally:
            lc.close()
    if not candidates:
        return []
    known = {r["producer_id"]: r["transactional_id"]
             for r in await txn_list(bootstrap, [], sorted({c["producer_id"] for c in candidates}), -1)}
    hanging = []
    for c in candidates:
        tid = known.get(c["producer_id"])
        if tid is not None:
            d = await txn_describe(bootstrap, tid)
            if (d["state"] == "Ongoing" and d["producer_epoch"] == c["producer_epoch"]
                    and f"{c['topic']}-{c['partition']}" in d["partitions"]):
                continue  # a live transaction, merely long
        hanging.append({**c, "transactional_id": tid or "?"})
    return hanging


async def txn_abort(bootstrap: str, topic: str, partition: int, start_offset: int | None,
                    producer_id: int | None, producer_epoch: int | None, coordinator_epoch: int | None) -> dict[str, Any]:
    """Write an abort marker straight into one partition, as a coordinator would: the way out
    of a hanging transaction that no coordinator will ever end (Kafka's `abort` command)."""
    conn = await connect(bootstrap)
    try:
        if start_offset is not None:
            found = [r for r in await _open_transactions(conn, topic, [partition]) if r["start_offset"] == start_offset]
            if not found:
                raise AdminError(f"no open transaction starts at offset {start_offset} in {topic}-{partition}")
            producer_id, producer_epoch = found[0]["producer_id"], found[0]["producer_epoch"]
            coordinator_epoch = max(found[0]["coordinator_epoch"], 0)
        if producer_id is None or producer_epoch is None or coordinator_epoch is None:
            raise AdminError("give --start-offset, or all of --producer-id, --producer-epoch, --coordinator-epoch")
        resp = await conn.request(WriteTxnMarkersRequest(markers=[WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
            topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])],
            coordinator_epoch=coordinator_epoch)]), version=0)
    finally:
        conn.close()
    code = resp.markers[0].topics[0].partitions[0].error_code
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        raise AdminError(f"aborting in {topic}-{partition}: CLUSTER_AUTHORIZATION_FAILED: markers are written only "
                         "through the inter-broker listener (inter_broker_listen; the broker logs it at start as "
                         "inter_broker): give that address as --bootstrap")
    check(code, f"aborting in {topic}-{partition}")
    return {"topic": topic, "partition": partition, "producer_id": producer_id, "producer_epoch": producer_epoch,
            "aborted": True}


# ---- argument parsing ------------------------------------------------------------------------------

def add_parsers(sub: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap", default="localhost:9092", type=bootstrap_arg, help="HOST:PORT of a broker")
    common.add_argument("--json", action="store_true", help="print JSON")
    t = sub.add_parser("topic", help="list, create, delete topics, add partitions, show or alter configs, "
                                             "delete records, show sizes")
    tsub = t.add_subparsers(dest="action", required=True)
    tsub.add_parser("list", parents=[common])
    c = tsub.add_parser("create", parents=[common])
    c.add_argument("name")
    c.add_argument("--partitions", type=int, default=-1)
    c.add_argument("--replication-factor", type=int, default=-1, help="replicas per partition (at most the live brokers)")
    c.add_argument("--config", action="append", default=[], help="KEY=VALUE, repeatable")
    d = tsub.add_parser("delete", parents=[common])
    d.add_argument("name")
    ap = tsub.add_parser("add-partitions", parents=[common], help="raise the partition count")
    ap.add_argument("name")
    ap.add_argument("--partitions", type=int, required=True, help="the new total (larger than now)")
    ap.add_argument("--validate-only", action="store_true", help="check, change nothing")
    ac = tsub.add_parser("alter-config", parents=[common], help="set or delete topic config overrides")
    ac.add_argument("name")
    ac.add_argument("--set", action="append", default=[], dest="sets", metavar="KEY=VALUE", help="repeatable")
    ac.add_argument("--delete", action="append", default=[], dest="deletes", metavar="KEY",
                    help="back to the default; repeatable")
    ac.add_argument("--validate-only", action="store_true", help="check, change nothing")
    dc = tsub.add_parser("configs", parents=[common], help="effective configs and where each comes from")
    dc.add_argument("name")

    admin_logs.add_parsers(tsub, common)
    admin_reassign.add_topic_parsers(tsub, common)
    t.set_defaults(func=_run_topic)

    g = sub.add_parser("group", help="list, describe, delete consumer groups, reset or delete their offsets")
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
    go = gsub.add_parser("delete-offsets", parents=[common], help="drop committed offsets of a topic")
    go.add_argument("group")
    go.add_argument("--topic", required=True)
    go.add_argument("--partition", type=int, action="append", default=[], dest="partitions",
                    help="repeatable; default: every partition of the topic")
    g.set_defaults(func=_run_group)

    x = sub.add_parser("txn", help="list, describe, find hanging or abort transactions")
    xsub = x.add_subparsers(dest="action", required=True)
    xl = xsub.add_parser("list", parents=[common])
    xl.add_argument("--state", action="append", default=[], help="Ongoing, PrepareCommit, ... (repeatable)")
    xl.add_argument("--producer-id", action="append", type=int, default=[], dest="producer_ids")
    xl.add_argument("--duration-ms", type=int, default=-1, help="only transactions running at least this long")
    xd = xsub.add_parser("describe", parents=[common])
    xd.add_argument("transactional_id")
    xh = xsub.add_parser("find-hanging", parents=[common])
    xh.add_argument("--topic", help="only this topic (default: all)")
    xh.add_argument("--max-transaction-timeout-ms", type=int, default=900_000,
                    help="the brokers' transaction_max_timeout_ms: younger transactions are not hanging yet")
    xa = xsub.add_parser("abort", parents=[common])
    xa.add_argument("--topic", required=True)
    xa.add_argument("--partition", type=int, required=True)
    xa.add_argument("--start-offset", type=int, help="first offset of the open transaction (from find-hanging)")
    xa.add_argument("--producer-id", type=int)
    xa.add_argument("--producer-epoch", type=int)
    xa.add_argument("--coordinator-epoch", type=int)
    x.set_defaults(func=_run_txn)

    admin_cluster.add_parsers(sub, common)


def _run_topic(args: argparse.Namespace) -> int:
    if args.action == "list":
        print_rows(run_command(topic_list(args.bootstrap)), args.json)
    elif args.action == "create":
        configs = dict(kv.split("=", 1) for kv in args.config)
        run_command(topic_create(args.bootstrap, args.name, args.partitions, configs, args.replication_factor))
        print(f"created {args.name}")
    elif args.action == "delete":
        run_command(topic_delete(args.bootstrap, args.name))
        print(f"deleted {args.name}")
    elif args.action == "add-partitions":
        run_command(topic_add_partitions(args.bootstrap, args.name, args.partitions, args.validate_only))
        print(f"{'valid' if args.validate_only else 'now'}: {args.name} with {args.partitions} partitions")
    elif args.action == "alter-config":
        sets = _pairs(args.sets)
        run_command(topic_alter_config(args.bootstrap, args.name, sets, args.deletes, args.validate_only))
        print(f"{'valid' if args.validate_only else 'altered'}: {args.name}")
    elif args.action == "configs":
        print_rows(run_command(topic_configs(args.bootstrap, args.name)), args.json)
    elif args.action in ("reassign", "reassignments"):
        admin_reassign.run_topic(args)
    else:

        admin_logs.run(args)
    return 0


def _pairs(items: list[str]) -> dict[str, str]:
    bad = [kv for kv in items if "=" not in kv]
    if bad:
        print(f"error: expected KEY=VALUE, got {', '.join(bad)}", file=sys.stderr)
        sys.exit(2)
    return dict(kv.split("=", 1) for kv in items)


def _run_group(args: argparse.Namespace) -> int:
    if args.action == "list":
        print_rows(run_command(group_list(args.bootstrap)), args.json)
    elif args.action == "describe":
        d = run_command(group_describe(args.bootstrap, args.group))
        if args.json:
            print_rows([d], True)
        else:
            print(f"group {d['group']}  state {d['state']}  protocol {d['protocol_type']}/{d['protocol']}")
            print_rows(d["members"], False)
            print_rows(d["offsets"], False)
    elif args.action == "delete":
        run_command(group_delete(args.bootstrap, args.group))
        print(f"deleted {args.group}")
    elif args.action == "reset-offsets":
        print_rows(run_command(group_reset_offsets(args.bootstrap, args.group, args.topic, args.to)), args.json)
    elif args.action == "delete-offsets":
        rows = run_command(group_delete_offsets(args.bootstrap, args.group, args.topic, args.partitions))
        print_rows(rows, args.json)
        failed = [f"{r['topic']}-{r['partition']}: {r['status']}" for r in rows if r["status"] != "deleted"]
        if failed:
            print(f"error: offsets kept for {', '.join(failed)}", file=sys.stderr)
            return 1
    return 0


def _run_txn(args: argparse.Namespace) -> int:
    if args.action == "list":
        print_rows(run_command(txn_list(args.bootstrap, args.state, args.producer_ids, args.duration_ms)), args.json)
    elif args.action == "describe":
        d = run_command(txn_describe(args.bootstrap, args.transactional_id))
        if args.json:
            print_rows([d], True)
        else:
            for k, v in d.items():
                print(f"{k}: {', '.join(v) if isinstance(v, list) else v}")
    elif args.action == "find-hanging":
        print_rows(run_command(txn_find_hanging(args.bootstrap, args.topic, args.max_transaction_timeout_ms)), args.json)
    elif args.action == "abort":
        print_rows([run_command(txn_abort(args.bootstrap, args.topic, args.partition, args.start_offset, args.producer_id,
                               args.producer_epoch, args.coordinator_epoch))], args.json)
    return 0
