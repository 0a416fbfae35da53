"""What a test asks a broker about the metadata quorum (DescribeQuorum).

On a broker's client listener DescribeQuorum is forwarded to the quorum leader, as Kafka's brokers
do, so every broker answers the leader's view. A node's own view (whom it follows, in which epoch)
is what its controller listener answers: the leader in full, any other NOT_LEADER_OR_FOLLOWER
naming the leader it knows."""

from __future__ import annotations

from dataclasses import dataclass

from broker.config import parse_voters
from protocol.messages.describe_quorum import (
    DescribeQuorumPartitionRequest,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeQuorumTopicRequest,
)

from .cluster import Cluster
from .raw import Raw


@dataclass(frozen=True)
class View:
    error: int
    leader: int
    epoch: int
    high_watermark: int
    log_ends: dict[int, int]


def describe(port: int) -> View | None:
    try:
        raw = Raw(port)
    except OSError:
        return None
    try:
        resp = raw.request(DescribeQuorumRequest(topics=[DescribeQuorumTopicRequest(
            topic_name="__cluster_metadata", partitions=[DescribeQuorumPartitionRequest(partition_index=0)])]), 2)
    except (OSError, AssertionError):
        return None
    finally:
        raw.close()
    assert isinstance(resp, DescribeQuorumResponse)
    p = resp.topics[0].partitions[0]
    return View(p.error_code, p.leader_id, p.leader_epoch, p.high_watermark,
                {v.replica_id: v.log_end_offset for v in p.current_voters})


def controller_port(c: Cluster, node: int) -> int:
    """The node's controller listener, from the `--voters` it was started with."""
    args = c[node].extra_args
    return parse_voters(args[args.index("--voters") + 1])[node][1]


def agreed_leader(c: Cluster, nodes: list[int]) -> View | None:
    """The leader's view once every node in `nodes` names the same leader and epoch (each asked
    on its controller listener, for its own view)."""
    views = {n: describe(controller_port(c, n)) for n in nodes}
    if any(v is None or v.leader < 0 for v in views.values()):
        return None
    pairs = {(v.leader, v.epoch) for v in views.values() if v is not None}
    if len(pairs) != 1:
        return None
    leader = views.get(next(iter(pairs))[0])
    return leader if leader is not None and leader.error == 0 else None


