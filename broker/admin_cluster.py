"""`ketch cluster describe`: the metadata quorum as the leader sees it (kafka-metadata-quorum
describe --status / --replication): leader, epoch, high watermark, each voter's log end and lag;
and the registered brokers, fenced or not (DescribeCluster with fenced brokers).

DescribeQuorum answers fully only on the quorum leader; asked elsewhere it names the leader, and
the command asks again on the leader's controller listener (the answer lists every voter's).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from protocol.errors import ErrorCode
from protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from protocol.messages.describe_quorum import (
    DescribeQuorumPartitionRequest,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeQuorumTopicRequest,
)

from . import cluster_up
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


async def cluster_describe(bootstrap: str) -> dict[str, Any]:
    conn = await connect(bootstrap)
    try:
        resp = await _ask(conn)
        cluster = await conn.request(DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                            include_fenced_brokers=True))
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
    }


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    c = sub.add_parser("cluster", help="start a local cluster; describe the metadata quorum")
    csub = c.add_subparsers(dest="action", required=True)
    d = csub.add_parser("describe", parents=[common], help="the quorum leader, epoch, voters and their lag")
    d.set_defaults(func=run)
    cluster_up.add_parser(csub)


def run(args: argparse.Namespace) -> int:
    d = run_command(cluster_describe(args.bootstrap))
    if args.json:
        print_rows([d], True)
        return 0
    print(f"Quorum leader: {d['leader']}  Epoch: {d['epoch']}  High watermark: {d['high_watermark']}")
    print_rows(d["voters"], False)
    print()
    print_rows(d["brokers"], False)
    return 0
