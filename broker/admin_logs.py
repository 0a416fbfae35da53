"""`ketch topic describe`, `delete-records` and `sizes`: the per-partition, log-level commands of
`ketch topic` (Kafka's kafka-topics --describe with offsets, kafka-delete-records, kafka-log-dirs),
kept apart from broker/admin.py, which wires them into the parser."""

from __future__ import annotations

import argparse
import json
from typing import Any

from protocol.errors import ErrorCode
from protocol.messages.delete_records import DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.describe_log_dirs import DescribableLogDirTopic, DescribeLogDirsRequest
from protocol.messages.elect_leaders import PREFERRED, UNCLEAN, ElectLeadersRequest
from protocol.messages.elect_leaders import TopicPartitions as ElectTopicPartitions
from protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic

from .cli_support import check, connect, print_rows, run_command
from .wire import BrokerConnection

ACTIONS = ("describe", "delete-records", "sizes")
EARLIEST, LATEST = -2, -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
TOPIC_RESOURCE, SOURCE_TOPIC_OVERRIDE = 2, 1


async def _partitions(conn: BrokerConnection, topic: str) -> list[int]:
    md = await conn.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                            allow_auto_topic_creation=False), version=4)
    check(md.topics[0].error_code, f"topic {topic!r}")
    return sorted(p.partition_index for p in md.topics[0].partitions)


async def _offsets(conn: BrokerConnection, topic: str, parts: list[int], ts: int, isolation: int) -> dict[int, int]:
    resp = await conn.request(ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsPartition(partition_index=p, timestamp=ts) for p in parts])]), version=5)
    out = {}
    for p in resp.topics[0].partitions:
        check(p.error_code, f"offsets of {topic}-{p.partition_index}")
        out[p.partition_index] = p.offset
    return out


async def topic_describe(bootstrap: str, name: str) -> dict[str, Any]:
    """Per partition: leader, replicas, ISR, log start, log end (high watermark) and last stable
    offset; and the configs set on the topic (those that differ from the broker's defaults)."""
    conn = await connect(bootstrap)
    try:
        md = await conn.request(MetadataRequest(topics=[MetadataRequestTopic(name=name)],
                                                allow_auto_topic_creation=False), version=4)
        t = md.topics[0]
        check(t.error_code, f"topic {name!r}")
        parts = sorted(t.partitions, key=lambda p: p.partition_index)
        ids = [p.partition_index for p in parts]
        start = await _offsets(conn, name, ids, EARLIEST, READ_UNCOMMITTED)
        end = await _offsets(conn, name, ids, LATEST, READ_UNCOMMITTED)
        lso = await _offsets(conn, name, ids, LATEST, READ_COMMITTED)
        cfg = await conn.request(DescribeConfigsRequest(resources=[DescribeConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=name, configuration_keys=None)]), version=1)
    finally:
        conn.close()
    check(cfg.results[0].error_code, f"configs of {name!r}")
    return {
        "topic": name, "internal": t.is_internal,
        "partitions": [{"partition": p.partition_index, "leader": p.leader_id, "replicas": list(p.replica_nodes),
                        "isr": list(p.isr_nodes), "log_start": start[p.partition_index],
                        "log_end": end[p.partition_index], "lso": lso[p.partition_index]} for p in parts],
        "configs": {c.name: c.value for c in cfg.results[0].configs if c.config_source == SOURCE_TOPIC_OVERRIDE},
    }


def print_description(d: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(d, indent=2))
        return
    configs = ", ".join(f"{k}={v}" for k, v in sorted(d["configs"].items())) or "(defaults)"
    print(f"Topic: {d['topic']}  Partitions: {len(d['partitions'])}  Internal: {d['internal']}  Configs: {configs}")
    print_rows([{**p, "replicas": ",".join(map(str, p["replicas"])), "isr": ",".join(map(str, p["isr"]))}
                for p in d["partitions"]], False)


async def topic_delete_records(bootstrap: str, name: str, partitions: list[int], before: int) -> list[dict[str, Any]]:
    """Records below `before` (-1: the high watermark) become unreadable; the rows give each
    partition's new log start."""
    conn = await connect(bootstrap)
    try:
        parts = partitions or await _partitions(conn, name)
        resp = await conn.request(DeleteRecordsRequest(topics=[DeleteRecordsTopic(name=name, partitions=[
            DeleteRecordsPartition(partition_index=p, offset=before) for p in parts])], timeout_ms=30000))
    finally:
        conn.close()
    rows = []
    for t in resp.topics:
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            check(p.error_code, f"deleting records of {t.name}-{p.partition_index}")
            rows.append({"topic": t.name, "partition": p.partition_index, "log_start_offset": p.low_watermark})
    return rows


async def topic_sizes(bootstrap: str, name: str | None) -> list[dict[str, Any]]:
    """Bytes on disk per partition (DescribeLogDirs), every topic's or one topic's."""
    conn = await connect(bootstrap)
    try:
        topics = None
        if name is not None:
            topics = [DescribableLogDirTopic(topic=name, partitions=await _partitions(conn, name))]
        resp = await conn.request(DescribeLogDirsRequest(topics=topics))
    finally:
        conn.close()
    check(resp.error_code, "describing log dirs")
    rows = []
    for d in resp.results:
        check(d.error_code, f"log dir {d.log_dir}")
        for t in d.topics:
            rows += [{"topic": t.name, "partition": p.partition_index, "size_bytes": p.partition_size,
                      "offset_lag": p.offset_lag, "log_dir": d.log_dir} for p in t.partitions]
    return sorted(rows, key=lambda r: (r["topic"], r["partition"]))


async def elect_leaders(bootstrap: str, name: str | None, partitions: list[int], unclean: bool) -> list[dict[str, Any]]:
    """ElectLeaders (kafka-leader-election): per partition, elected or why not."""
    conn = await connect(bootstrap)
    try:
        wanted = None
        if name is not None:
            parts = partitions or await _partitions(conn, name)
            wanted = [ElectTopicPartitions(topic=name, partitions=parts)]
        resp = await conn.request(ElectLeadersRequest(election_type=UNCLEAN if unclean else PREFERRED,
                                                      topic_partitions=wanted, timeout_ms=30000))
    finally:
        conn.close()
    check(resp.error_code, "electing leaders")
    rows = [{"topic": r.topic, "partition": p.partition_id,
             "result": "elected" if p.error_code == 0 else ErrorCode(p.error_code).name}
            for r in resp.replica_election_results for p in r.partition_result]
    return sorted(rows, key=lambda r: (r["topic"], r["partition"]))


def add_parsers(tsub: Any, common: argparse.ArgumentParser) -> None:
    de = tsub.add_parser("describe", parents=[common],
                         help="partitions with leader, replicas, ISR, log start/end, LSO; configs set on the topic")
    de.add_argument("name")
    dr = tsub.add_parser("delete-records", parents=[common],
                         help="make records below an offset unreadable (moves the log start)")
    dr.add_argument("name")
    dr.add_argument("--before", type=int, required=True, metavar="OFFSET",
                    help="first offset to keep; -1 means the high watermark (delete everything)")
    dr.add_argument("--partition", action="append", type=int, default=[], dest="partitions", metavar="P",
                    help="repeatable (default: every partition)")
    sz = tsub.add_parser("sizes", parents=[common], help="bytes on disk per partition")
    sz.add_argument("name", nargs="?", help="one topic (default: all)")
    el = tsub.add_parser("elect-leaders", parents=[common],
                         help="give partitions back to their preferred replica, or (--unclean) to any live one")
    el.add_argument("name", nargs="?", help="one topic (default: every partition of every topic)")
    el.add_argument("--partition", action="append", type=int, default=[], dest="partitions", metavar="P",
                    help="repeatable (default: every partition of the topic)")
    el.add_argument("--unclean", action="store_true",
                    help="for partitions without a live in-sync replica: any live replica (may lose data)")


def run(args: argparse.Namespace) -> None:
    if args.action == "describe":
        print_description(run_command(topic_describe(args.bootstrap, args.name)), args.json)
    elif args.action == "delete-records":
        print_rows(run_command(topic_delete_records(args.bootstrap, args.name, args.partitions, args.before)), args.json)
    elif args.action == "sizes":
        print_rows(run_command(topic_sizes(args.bootstrap, args.name)), args.json)
    elif args.action == "elect-leaders":
        print_rows(run_command(elect_leaders(args.bootstrap, args.name, args.partitions, args.unclean)), args.json)
