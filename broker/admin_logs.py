"""`ketch topic delete-records` and `ketch topic sizes`: the log-level commands of `ketch topic`
(Kafka's kafka-delete-records and kafka-log-dirs), kept apart from broker/admin.py, which wires
them into the parser."""

from __future__ import annotations

import argparse
from typing import Any

from protocol.messages.delete_records import DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic
from protocol.messages.describe_log_dirs import DescribableLogDirTopic, DescribeLogDirsRequest
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic

from .cli_support import check, connect, print_rows, run_command
from .wire import BrokerConnection

ACTIONS = ("delete-records", "sizes")


async def _partitions(conn: BrokerConnection, topic: str) -> list[int]:
    md = await conn.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                            allow_auto_topic_creation=False), version=4)
    check(md.topics[0].error_code, f"topic {topic!r}")
    return sorted(p.partition_index for p in md.topics[0].partitions)


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


def add_parsers(tsub: Any, common: argparse.ArgumentParser) -> None:
    dr = tsub.add_parser("delete-records", parents=[common],
                         help="make records below an offset unreadable (moves the log start)")
    dr.add_argument("name")
    dr.add_argument("--before", type=int, required=True, metavar="OFFSET",
                    help="first offset to keep; -1 means the high watermark (delete everything)")
    dr.add_argument("--partition", action="append", type=int, default=[], dest="partitions", metavar="P",
                    help="repeatable (default: every partition)")
    sz = tsub.add_parser("sizes", parents=[common], help="bytes on disk per partition")
    sz.add_argument("name", nargs="?", help="one topic (default: all)")


def run(args: argparse.Namespace) -> None:
    if args.action == "delete-records":
        print_rows(run_command(topic_delete_records(args.bootstrap, args.name, args.partitions, args.before)), args.json)
    elif args.action == "sizes":
        print_rows(run_command(topic_sizes(args.bootstrap, args.name)), args.json)
