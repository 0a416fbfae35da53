"""Where a partition's replicas go and who leads it: the controller's rules, sans-IO.

Replicas are striped over the live brokers (unfenced, not shutting down) in node-id order, each
partition starting one broker further on, so leaders — the first replica — spread evenly; the
starting broker depends on the topic's name so that many one-partition topics do not all land on
the same broker (Kafka's StripedReplicaPlacer starts at a random broker).

Leaders are chosen from the ISR, then the eligible leader replicas (partition_change.py,
KIP-966). A partition whose leader is fenced or shutting down gets the first live ISR member; with
none, it has no leader (-1) until a member of its ELR (or its last known leader) comes back —
unless the topic sets unclean.leader.election.enable, when any live replica takes it (losing what
it lacks). ElectLeaders and the periodic preferred-leader check move leadership back to the first
replica once it is in sync.

A replica whose log directory its broker reported failed (KIP-858: metadata/image.py
`replica_online`) counts, for that partition only, as a replica on a broker that is down: it
leaves the ISR in the next sweep and may not lead.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Sequence

from protocol.errors import ErrorCode, KafkaError
from protocol.messages.metadata_records import NO_LEADER_CHANGE, PartitionChangeRecord
from protocol.topic_partition import TopicPartition

from ..metadata.image import NO_LEADER, MetadataImage, PartitionInfo, TopicInfo
from .partition_change import build, min_isr


def place(topic: str, first_partition: int, count: int, replication_factor: int,
          live: Sequence[int]) -> list[list[int]]:
    """Replica lists for partitions `first_partition .. first_partition + count - 1`."""
    brokers = sorted(live)
    if replication_factor > len(brokers):
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Unable to replicate the partition {replication_factor} time(s): The target replication "
                         f"factor of {replication_factor} cannot be reached because only {len(brokers)} broker(s) "
                         "are registered.")
    start = zlib.crc32(topic.encode()) % len(brokers)
    out = []
    for p in range(first_partition, first_partition + count):
        first = (start + p) % len(brokers)
        out.append([brokers[(first + k) % len(brokers)] for k in range(replication_factor)])
    return out


def check_assignment(replicas: Sequence[int], registered: Iterable[int]) -> None:
    """A replica list given by the client (CreateTopics / CreatePartitions assignments)."""
    known = set(registered)
    if not replicas:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
    for b in replicas:
        if list(replicas).count(b) > 1:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes the broker {b} more than once.")
        if b not in known:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes broker {b}, but no such broker is registered.")


def initial_state(replicas: Sequence[int], live: Iterable[int]) -> PartitionInfo:
    """A new partition: led by its first live replica, every live replica in sync (all are
    empty); a replica on a broker that is down joins once it has caught up."""
    up = set(live)
    leader = next((r for r in replicas if r in up), NO_LEADER)
    isr = tuple(r for r in replicas if r in up) or (replicas[0],)
    return PartitionInfo(tuple(replicas), isr, leader, 0, 0)


def eligible(image: MetadataImage, p: PartitionInfo, live: set[int]) -> Callable[[int], bool]:
    """Who may lead `p` or join its ISR: a live broker whose replica's log directory is online."""
    if not p.directories:
        return live.__contains__
    return lambda r: r in live and image.replica_online(p, r)


def move_leadership(image: MetadataImage, leaving: set[int], default_min_isr: int,
                    unclean_shutdown: frozenset[int] = frozenset()) -> list[PartitionChangeRecord]:
    """Changes for every partition after brokers `leaving` are fenced or shut down (out of every
    ISR; `unclean_shutdown` out of every ELR too), replicas in failed log directories out of
    their ISR, and every leaderless partition that a live broker (one that came back) may now lead."""
    live = {b.node_id for b in image.brokers if b.live} - leaving
    out = []
    for t in image.topics.values():
        m = min_isr(image, t, default_min_isr)
        for i, p in enumerate(t.partitions):
            ok = eligible(image, p, live)
            isr = [r for r in p.isr if r not in leaving and (not p.directories or image.replica_online(p, r))]
            change = build(t, i, isr, ok, m, unclean_shutdown=unclean_shutdown, unclean_election=unclean_allowed(t))
            if change is not None:
                out.append(change)
    return out


def led_by(image: MetadataImage, broker: int) -> list[tuple[TopicInfo, int]]:
    return [(t, i) for t in image.topics.values() for i, p in enumerate(t.partitions) if p.leader == broker]


def elect(image: MetadataImage, wanted: Iterable[tuple[TopicInfo, int]], unclean: bool,
          default_min_isr: int = 1) -> tuple[list[PartitionChangeRecord], dict[TopicPartition, ErrorCode]]:
    """ElectLeaders: (changes, outcome per partition). Preferred: the first replica, if it is live
    and in sync (else PREFERRED_LEADER_NOT_AVAILABLE). Unclean: only for a partition without a
    live leader — a live ISR member if any, else a live ELR member, else its last known leader,
    else any live replica, which becomes the whole ISR (what it lacks is lost: the operator chose
    availability), else ELIGIBLE_LEADERS_NOT_AVAILABLE."""
    live = {b.node_id for b in image.brokers if b.live}
    changes, outcome = [], {}
    for t, i in wanted:
        p = t.partitions[i]
        key = TopicPartition(t.name, i)
        if not unclean:
            target = p.replicas[0] if p.replicas else NO_LEADER
            if p.leader == target:
                outcome[key] = ErrorCode.ELECTION_NOT_NEEDED
            elif eligible(image, p, live)(target) and target in p.isr:
                changes.append(PartitionChangeRecord(partition_id=i, topic_id=t.topic_id, leader=target))
                outcome[key] = ErrorCode.NONE
            else:
                outcome[key] = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            continue
        if p.leader in live:
            outcome[key] = ErrorCode.ELECTION_NOT_NEEDED
            continue
        change = build(t, i, None, eligible(image, p, live), min_isr(image, t, default_min_isr), unclean_election=True)
        if change is not None and change.leader not in (NO_LEADER, NO_LEADER_CHANGE):
            changes.append(change)
            outcome[key] = ErrorCode.NONE
        else:
            outcome[key] = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    return changes, outcome


def unclean_allowed(t: TopicInfo) -> bool:
    return t.configs.get("unclean.leader.election.enable", "false").lower() == "true"
