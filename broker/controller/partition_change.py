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
  becomes the whole ISR.
* LastKnownElr (Kafka's, as when it does not store only the last known leader): the replicas that
  may hold acknowledged records no replica known to be whole holds — members of an ISR or ELR below
  min.insync.replicas that left it by an unclean shutdown (their logs may be torn, or may be
  whole: a killed process loses nothing) — and the leader the partition had when its ISR emptied.
  Cleared once the ISR is back at min.insync.replicas (or by an unclean election).
* With the ISR and the ELR empty, nobody is known to hold everything: the partition waits until
  every LastKnownElr member may lead again, and then the one whose log goes furthest — the highest
  last leader epoch, then the highest log end, as the controller asked each (GetReplicaLogInfo,
  broker/controller/recovery.py) — leads, as the whole ISR; a sole member needs no asking. The
  others stay candidates until the ISR is back at min.insync.replicas: should the new leader lose
  its page cache before they are in sync again, they are asked with it. Electing
  one without looking (its last known leader, as before) made a broker whose log a power cut had
  torn lead while two whole replicas were back (simulation seed 314): they truncated to it (mixed-1
  from 608 to 245), and 232 acknowledged writes were lost. An unclean election (the topic allows
  it, or an operator asks) does not wait: it takes a live candidate, else any live replica.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from protocol.messages.metadata_records import NO_LEADER_CHANGE, PartitionChangeRecord, frame

from ..metadata.image import NO_LEADER, MetadataImage, PartitionInfo, TopicInfo

ELR_RECORD_VERSION = 2  # PartitionChangeRecord's first version with the ELR fields


def min_isr(image: MetadataImage, t: TopicInfo, default: int) -> int:
    """The topic's min.insync.replicas: its override, else the cluster-wide dynamic config, else
    the controller's static setting (Kafka's getTopicEffectiveMinIsr)."""
    value = t.configs.get("min.insync.replicas") or image.broker_configs.get("", {}).get("min.insync.replicas")
    return int(value) if value else default


LogEnds = Mapping[int, tuple[int, int]]  # replica -> (last written leader epoch, log end offset)


def build(t: TopicInfo, i: int, isr: Sequence[int] | None, may_lead: Callable[[int], bool], min_insync: int,
          *, unclean_shutdown: Collection[int] = (), unclean_election: bool = False,
          logs: LogEnds | None = None) -> PartitionChangeRecord | None:
    """The change that gives partition `i` the ISR `isr` (None: as it is) and what follows from it
    for the ELR and the leader; None if nothing changes. `logs`: what the recovery candidates
    answered (recover_from)."""
    p = t.partitions[i]
    target_isr = list(p.isr if isr is None else isr)
    if len(target_isr) >= min_insync:
        elr: list[int] = []
        last_known: list[int] = []
    else:
        elr = [r for r in p.replicas if (r in p.elr or r in p.isr) and r not in target_isr
               and r not in unclean_shutdown]
        last_known = [r for r in p.replicas if (r in p.last_known_elr or r in p.isr or r in p.elr)
                      and r not in target_isr and r not in elr]
        if not target_isr and p.isr and p.leader != NO_LEADER and p.leader not in last_known:
            last_known.append(p.leader)  # the last known leader, eligible or not

    def valid(r: int) -> bool:
        return (r in target_isr or (not target_isr and r in elr)) and may_lead(r)

    leader = p.leader if p.leader != NO_LEADER and valid(p.leader) else \
        next((r for r in p.replicas if valid(r)), NO_LEADER)
    from_elr = leader != NO_LEADER and leader not in target_isr
    recovered = unclean = False  # the new leader is the whole ISR
    if leader == NO_LEADER and not target_isr and not elr and last_known:
        leader = recover_from(last_known, may_lead, logs)
        recovered = leader != NO_LEADER
    if leader == NO_LEADER and unclean_election:  # what it lacks is lost: the operator chose availability
        leader = next((r for r in last_known + list(p.replicas) if may_lead(r)), NO_LEADER)
        unclean = leader != NO_LEADER
    if from_elr or recovered or unclean:
        target_isr = [leader]
        elr = [] if recovered or unclean or min_insync <= 1 else [r for r in elr if r != leader]
    if recovered and len(target_isr) < min_insync:  # the others stay candidates until back in sync
        last_known = [r for r in last_known if r != leader]
    elif recovered or unclean:
        last_known = []
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


def recover_from(candidates: Sequence[int], may_lead: Callable[[int], bool], logs: LogEnds | None) -> int:
    """Who leads a partition nobody is known to hold whole: NO_LEADER until every candidate may
    lead; a sole one then; several, only once each has told its log's end (`logs`), the furthest
    (then the first named)."""
    if not candidates or not all(may_lead(r) for r in candidates):
        return NO_LEADER
    if len(candidates) == 1:
        return candidates[0]
    if logs is None or any(r not in logs for r in candidates):
        return NO_LEADER
    return max(candidates, key=lambda r: (logs[r], -candidates.index(r)))


def needs_recovery(p: PartitionInfo, may_lead: Callable[[int], bool]) -> bool:
    """A leaderless partition whose candidates are all back and must be asked for their logs."""
    return p.leader == NO_LEADER and not p.isr and not p.elr and len(p.last_known_elr) > 1 \
        and all(may_lead(r) for r in p.last_known_elr)


def framed(change: PartitionChangeRecord) -> bytes:
    """The change as a metadata record: v0 (Kafka's oldest, what Ketch always wrote) unless it
    carries directories (v1, KIP-858) or ELR fields (v2)."""
    elr_fields = change.eligible_leader_replicas is not None or change.last_known_elr is not None
    return frame(change, ELR_RECORD_VERSION if elr_fields else 1 if change.directories is not None else 0)
