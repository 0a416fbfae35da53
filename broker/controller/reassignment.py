"""Partition reassignment, sans-IO: moving a partition's replicas to another set of brokers.

As Kafka's controller does it (KIP-455): the target replicas are added first — the replica list
becomes target + the old ones leaving, with `adding` and `removing` recorded — so the new
replicas fetch from the leader and join the ISR through the leader's AlterPartition; once every
adding replica is in sync, one change drops the leaving ones from the replicas and the ISR (and
moves leadership if the leader was leaving). Cancelling goes back to the original replicas.
Nothing here throttles the copy: a new replica fetches at the follower's usual pace.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from protocol.errors import ErrorCode, KafkaError
from protocol.messages.metadata_records import NO_LEADER_CHANGE, PartitionChangeRecord

from ..metadata.image import MetadataImage, PartitionInfo, TopicInfo
from .placement import check_assignment


def original(p: PartitionInfo) -> list[int]:
    """The replicas before the reassignment under way (all of them when none is)."""
    return [r for r in p.replicas if r not in p.adding]


def start(image: MetadataImage, t: TopicInfo, i: int, target: Sequence[int] | None) -> PartitionChangeRecord | None:
    """The change that starts (target) or cancels (None) a reassignment of partition `i`; None
    when nothing changes. KafkaError for a target Kafka refuses."""
    p = t.partitions[i]
    if target is None:
        if not p.adding and not p.removing:
            raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                             f"no reassignment of {t.name}-{i} is in progress")
        back = original(p)
        return _settle(t, i, p, back)
    check_assignment(target, [b.node_id for b in image.brokers])
    before = original(p)
    if list(target) == before and not p.adding and not p.removing:
        return None
    adding = [r for r in target if r not in before]
    removing = [r for r in before if r not in target]
    change = PartitionChangeRecord(partition_id=i, topic_id=t.topic_id,
                                   replicas=list(target) + removing, adding_replicas=adding,
                                   removing_replicas=removing)
    if not adding:  # only replicas leaving: nothing to wait for
        return _settle(t, i, p, list(target))
    return change


def completions(image: MetadataImage, topics: Iterable[TopicInfo]) -> list[PartitionChangeRecord]:
    """Reassignments whose new replicas are all in sync: drop the leaving ones."""
    out = []
    for t in topics:
        for i, p in enumerate(t.partitions):
            if (p.adding or p.removing) and all(r in p.isr for r in p.adding):
                target = [r for r in p.replicas if r not in p.removing]
                change = _settle(t, i, p, target)
                if change is not None:
                    out.append(change)
    return out


def _settle(t: TopicInfo, i: int, p: PartitionInfo, replicas: list[int]) -> PartitionChangeRecord | None:
    """Replicas become `replicas`, the ISR what of it is in sync, the leader one of them."""
    isr = [r for r in p.isr if r in replicas]
    if not isr:
        return None  # none of the final replicas is in sync yet: wait
    leader = p.leader if p.leader in replicas else next(r for r in replicas if r in isr)  # the target's order
    elr = [r for r in p.elr if r in replicas]  # a replica leaving leaves the ELR too
    last_known = [r for r in p.last_known_elr if r in replicas]
    return PartitionChangeRecord(partition_id=i, topic_id=t.topic_id, replicas=replicas,
                                 isr=isr if isr != list(p.isr) else None,
                                 leader=leader if leader != p.leader else NO_LEADER_CHANGE,
                                 adding_replicas=[], removing_replicas=[],
                                 eligible_leader_replicas=elr if elr != list(p.elr) else None,
                                 last_known_elr=last_known if last_known != list(p.last_known_elr) else None)

