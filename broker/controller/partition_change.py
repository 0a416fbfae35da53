"""How a partition's ISR, eligible leader replicas (ELR) and leader change, sans-IO (KIP-966).

Every partition change the controller decides on a broker's account — a fence, a controlled
shutdown, a registration, an unfence, a leader's AlterPartition, an unclean election — is built
here from the ISR it should have, so that the ELR and the leader follow one set of rules:

* While the ISR holds at least min.insync.replicas, there is no ELR. Below that, the members that
  leave the ISR join the ELR: the leader does not advance the high watermark while the ISR is below
  min.insync.replicas, so a replica that was in the ISR when it fell below still holds everything
  up to the high watermark. A broker back from an unclean shutdown (its log possibly torn) leaves
  the ELR, and a member that rejoins the ISR leaves it too. The ISR may become empty.
* The leader stays if it is still in the ISR and may lead; otherwise the first replica that is in
  the ISR and may lead takes over, or, with an empty ISR, the first ELR member that may — which then
  becomes the whole ISR. A partition with neither keeps, in LastKnownElr, the leader it had when its
  ISR emptied (Kafka's last known leader): when that broker may lead again and the ISR and the ELR
  are still empty, it leads, as the whole ISR (no replica can have more, as far as anyone knows).
  Only then, and only where the topic allows it, an unclean election takes any live replica.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from protocol.messages.metadata_records import NO_LEADER_CHANGE, PartitionChangeRecord, frame

from ..metadata.image import NO_LEADER, MetadataImage, PartitionInfo, TopicInfo

ELR_RECORD_VERSION = 2  # PartitionChangeRecord's first version with the ELR fields


def min_isr(image: MetadataImage, t: TopicInfo, default: int) -> int:
    """The topic's min.insync.replicas: its override, else the cluster-wide dynamic config, else
    the controller's static setting (Kafka's getTopicEffectiveMinIsr)."""
    value = t.configs.get("min.insync.replicas") or image.broker_configs.get("", {}).get("min.insync.replicas")
    return int(value) if value else default


def build(t: TopicInfo, i: int, isr: Sequence[int] | None, may_lead: Callable[[int], bool], min_insync: int,
          *, unclean_shutdown: Collection[int] = (), unclean_election: bool = False) -> PartitionChangeRecord | None:
    """The change that gives partition `i` the ISR `isr` (None: as it is) and what follows from it
    for the ELR and the leader; None if nothing changes."""
    p = t.partitions[i]
    target_isr = list(p.isr if isr is None else isr)
    if len(target_isr) >= min_insync:
        elr: list[int] = []
    else:
        elr = [r for r in p.replicas if (r in p.elr or r in p.isr) and r not in target_isr
               and r not in unclean_shutdown]

    def valid(r: int) -> bool:
        return (r in target_isr or (not target_isr and r in elr)) and may_lead(r)

    leader = p.leader if p.leader != NO_LEADER and valid(p.leader) else \
        next((r for r in p.replicas if valid(r)), NO_LEADER)
    from_elr = leader != NO_LEADER and leader not in target_isr
    unclean = False  # the last known leader, or any live replica: what it lacks is lost
    if leader == NO_LEADER and not target_isr and not elr and len(p.last_known_elr) == 1 \
            and may_lead(p.last_known_elr[0]):
        leader, unclean = p.last_known_elr[0], True
    if leader == NO_LEADER and unclean_election:
        leader = next((r for r in p.replicas if may_lead(r)), NO_LEADER)
        unclean = leader != NO_LEADER
    if from_elr or unclean:  # the new leader is the whole ISR
        target_isr = [leader]
        elr = [] if unclean or min_insync <= 1 else [r for r in elr if r != leader]
    last_known = _last_known(p, target_isr, leader)
    change = PartitionChangeRecord(
        partition_id=i, topic_id=t.topic_id,
        isr=target_isr if tuple(target_isr) != p.isr else None,
        leader=leader if leader != p.leader else NO_LEADER_CHANGE,
        eligible_leader_replicas=elr if tuple(elr) != p.elr else None,
        last_known_elr=last_known if tuple(last_known) != p.last_known_elr else None)
    if change.isr is None and change.leader == NO_LEADER_CHANGE and change.eligible_leader_replicas is None \
            and change.last_known_elr is None:
        return None
    return change


def _last_known(p: PartitionInfo, target_isr: Sequence[int], leader: int) -> list[int]:
    """LastKnownElr: set to the leader when the ISR empties, cleared once the partition has a leader."""
    if leader != NO_LEADER:
        return []
    if not target_isr and p.isr and p.leader != NO_LEADER:
        return [p.leader]
    return list(p.last_known_elr)


def framed(change: PartitionChangeRecord) -> bytes:
    """The change as a metadata record: v0 (Kafka's oldest, what Ketch always wrote) unless it
    carries directories (v1, KIP-858) or ELR fields (v2)."""
    elr_fields = change.eligible_leader_replicas is not None or change.last_known_elr is not None
    return frame(change, ELR_RECORD_VERSION if elr_fields else 1 if change.directories is not None else 0)
