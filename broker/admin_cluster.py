"""`ketch cluster describe`: the metadata quorum as the leader sees it (kafka-metadata-quorum
describe --status / --replication): leader, epoch, high watermark, each voter's log end and lag;
the registered brokers, fenced or not (DescribeCluster with fenced brokers); and the partitions
that need attention (kafka-topics --describe --unavailable-partitions / --under-min-isr-partitions):
those without a leader and those whose ISR is below the topic's min.insync.replicas.

DescribeQuorum answers fully only on the quorum leader; asked elsewhere it names the leader, and
the command asks again on the leader's controller listener (the answer lists every voter's).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from protocol.errors import ErrorCode
from protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from protocol.messages.describe_quorum import (
    DescribeQuorumPartitionRequest,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeQuorumTopicRequest,
)
from protocol.messages.metadata import MetadataRequest, MetadataResponse

from . import admin_reassign, cluster_up
from .cli_support import AdminError, connect, print_rows, run_command
from .wire import BrokerConnection

_REQUEST = DescribeQuorumRequest(topics=[DescribeQuorumTopicRequest(
    topic_name="__cluster_metadata", partitions=[DescribeQuorumPartitionRequest(partition_index=0)])])


async def _ask(conn: BrokerConnection) -> DescribeQuorumResponse:
    resp = await conn.request(_REQUEST)
    assert isinstance(resp, DescribeQuorumResponse)
    if resp.error_code:
        raise AdminError(f"describing the quorum: {ErrorCode(resp.error_code).name}")
    return resp


TOPIC_RESOURCE = 2


async def _attention(conn: BrokerConnection) -> list[dict[str, Any]]:
    """Partitions without a leader, or with fewer in sync than the topic's min.insync.replicas."""
    md = await conn.request(MetadataRequest(topics=None, allow_auto_topic_creation=False))
    assert isinstance(md, MetadataResponse)
    topics = [t for t in md.topics if t.error_code == 0 and t.name]
    min_isr: dict[str, int] = {}
    if topics:
        cfg = await conn.request(DescribeConfigsRequest(resources=[DescribeConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=t.name or "", configuration_keys=["min.insync.replicas"])
            for t in topics]))
        assert isinstance(cfg, DescribeConfigsResponse)
        for r in cfg.results:
            for c in r.configs:
                if c.name == "min.insync.replicas" and c.value is not None:
                    min_isr[r.resource_name] = int(c.value)
    out = []
    for t in sorted(topics, key=lambda t: t.name or ""):
        need = min_isr.get(t.name or "", 1)
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            problem = "no leader" if p.leader_id < 0 else \
                f"ISR {len(p.isr_nodes)} below min.insync.replicas {need}" if len(p.isr_nodes) < need else None
            if problem:
                out.append({"topic": t.name, "partition": p.partition_index, "leader": p.leader_id,
                            "replicas": ",".join(map(str, p.replica_nodes)), "isr": ",".join(map(str, p.isr_nodes)),
                            "problem": problem})
    return out


async def cluster_describe(bootstrap: str) -> dict[str, Any]:
    conn = await connect(bootstrap)
    try:
        resp = await _ask(conn)
        cluster = await conn.request(DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                            include_fenced_brokers=True))
        attention = await _attention(conn)
    finally:
        conn.close()
    assert isinstance(cluster, DescribeClusterResponse)
    brokers = [{"node": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack,
                "state": "fenced" if b.is_fenced else "alive"} for b in cluster.brokers]
    p = resp.topics[0].partitions[0]
    if p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and p.leader_id >= 0:
        listeners = {n.node_id: n.listeners for n in resp.nodes}
        target = next(iter(listeners.get(p.leader_id, [])), None)
        if target is None:
            raise AdminError(f"the quorum leader is node {p.leader_id}, whose controller listener is not known")
        leader_conn = await BrokerConnection.connect(target.host, target.port, client_id="ketch-admin")
        try:
            resp = await _ask(leader_conn)
        finally:
            leader_conn.close()
        p = resp.topics[0].partitions[0]
    if p.error_code:
        raise AdminError(f"describing the quorum: {ErrorCode(p.error_code).name} ({p.error_message or ''})")
    now = int(time.time() * 1000)
    return {
        "leader": p.leader_id, "epoch": p.leader_epoch, "high_watermark": p.high_watermark,
        "voters": [{"node": v.replica_id, "log_end_offset": v.log_end_offset,
                    "lag": max(p.high_watermark - v.log_end_offset, 0),
                    "last_fetch_ms_ago": now - v.last_fetch_timestamp if v.last_fetch_timestamp >= 0 else -1,
                    "role": "leader" if v.replica_id == p.leader_id else "follower"}
                   for v in p.current_voters],
        "brokers": brokers,
        "partitions_needing_attention": attention,
    }


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    c = sub.add_parser("cluster", help="start a local cluster; describe the metadata quorum")
    csub = c.add_subparsers(dest="action", required=True)
    d = csub.add_parser("describe", parents=[common], help="the quorum leader, epoch, voters and their lag")
    d.set_defaults(func=run)
    cluster_up.add_parser(csub)
    admin_reassign.add_cluster_parsers(csub, common)


def run(args: argparse.Namespace) -> int:
    d = run_command(cluster_describe(args.bootstrap))
    if args.json:
        print_rows([d], True)
        return 0
    print(f"Quorum leader: {d['leader']}  Epoch: {d['epoch']}  High watermark: {d['high_watermark']}")
    print_rows(d["voters"], False)
    print()
    print_rows(d["brokers"], False)
    print()
    if d["partitions_needing_attention"]:
        print_rows(d["partitions_needing_attention"], False)
    else:
        print("Every partition has a leader and at least min.insync.replicas in sync.")
    return 0
