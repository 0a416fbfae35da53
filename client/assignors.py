"""Partition assignors and the "consumer" protocol's subscription/assignment bytes.

The bytes are Kafka's ConsumerProtocolSubscription / ConsumerProtocolAssignment layouts (an int16
version, then the fields of that version, never flexible), declared with the protocol schema
engine. Using the exact layouts is what lets one of our consumers lead a group whose other members
are Java, librdkafka or aiokafka consumers, and follow a leader that is one of them.

Two assignors:
* "range" (eager): per topic, the partitions are cut into contiguous ranges over the members
  subscribed to it, sorted by member id; the first `n % m` members get one more. Same result as
  Java's RangeAssignor for members without racks.
* "cooperative-sticky" (incremental, KIP-429): keeps every partition with its current owner where
  balance allows, hands out the rest to the least-loaded eligible member, then moves partitions one
  at a time from members with more than one above another eligible member's count. A partition
  that changes owner is withheld from its new owner in this round; the old owner revokes it, rejoins,
  and the next round hands it over. That two-step move is what lets members keep consuming the
  partitions that do not move during a rebalance.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from protocol.primitives import Reader, Writer
from protocol.schema import BYTES, INT32, STRING, Array, Struct, f, schema

from .cluster import TopicPartition

SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3
_MAX_KNOWN = 3


@schema
class _TopicPartitions(Struct):
    topic: str = f(STRING)
    partitions: list[int] = f(Array(INT32))


@schema
class _SubscriptionBody(Struct):
    topics: list[str] = f(Array(STRING))
    user_data: bytes | None = f(BYTES, default=None)
    owned_partitions: list[_TopicPartitions] = f(Array(_TopicPartitions), "1+")
    generation_id: int = f(INT32, "2+", default=-1)
    rack_id: str | None = f(STRING, "3+", default=None)


@schema
class _AssignmentBody(Struct):
    assigned_partitions: list[_TopicPartitions] = f(Array(_TopicPartitions))
    user_data: bytes | None = f(BYTES, default=None)


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a member sends in JoinGroup: the topics it wants and, for cooperative rebalancing,
    the partitions it owns now and the generation in which it got them."""

    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    user_data: bytes | None = None
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


def _group(tps: Iterable[TopicPartition]) -> list[_TopicPartitions]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in tps:
        by_topic[tp.topic].append(tp.partition)
    return [_TopicPartitions(topic=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())]


def _ungroup(items: Iterable[_TopicPartitions] | None) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(t.topic, p) for t in items or () for p in t.partitions)


def encode_subscription(s: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    w = Writer()
    w.int16(version)
    body = _SubscriptionBody(topics=list(s.topics), user_data=s.user_data, owned_partitions=_group(s.owned_partitions),
                             generation_id=s.generation_id, rack_id=s.rack_id)
    _SubscriptionBody._codec(version, False)[1](w, body)
    return w.getvalue()


def decode_subscription(data: bytes) -> Subscription:
    """Any version: newer versions only append fields, so we read the fields we know."""
    r = Reader(data)
    version = r.int16()
    if version < 0:
        raise ValueError(f"subscription version {version}")
    body: _SubscriptionBody = _SubscriptionBody._codec(min(version, _MAX_KNOWN), False)[0](r)
    owned = _ungroup(body.owned_partitions)
    generation = body.generation_id
    ud = body.user_data
    if version < 2 and ud is not None and len(ud) == 4:
        generation = Reader(ud).int32()  # Java's cooperative-sticky puts the generation in user data
    return Subscription(tuple(body.topics or ()), owned, generation, ud, body.rack_id)


def encode_assignment(a: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    w = Writer()
    w.int16(version)
    _AssignmentBody._codec(min(version, _MAX_KNOWN), False)[1](
        w, _AssignmentBody(assigned_partitions=_group(a.partitions), user_data=a.user_data))
    return w.getvalue()


def decode_assignment(data: bytes) -> Assignment:
    if not data:
        return Assignment(())  # an empty assignment (e.g. after an error) is sent as no bytes
    r = Reader(data)
    version = r.int16()
    if version < 0:
        raise ValueError(f"assignment version {version}")
    body: _AssignmentBody = _AssignmentBody._codec(min(version, _MAX_KNOWN), False)[0](r)
    return Assignment(_ungroup(body.assigned_partitions), body.user_data)


# --------------------------------------------------------------------------------------- assignors
class Assignor(Protocol):
    name: str
    cooperative: bool

    def assign(self, partitions_per_topic: Mapping[str, int],
               members: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        """member id -> the partitions it gets this round."""
        ...


@dataclass
class RangeAssignor:
    name: str = "range"
    cooperative: bool = False

    def assign(self, partitions_per_topic: Mapping[str, int],
               members: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {m: [] for m in members}
        by_topic: dict[str, list[str]] = defaultdict(list)
        for mid, sub in members.items():
            for t in set(sub.topics):
                by_topic[t].append(mid)
        for topic, subscribers in sorted(by_topic.items()):
            n = partitions_per_topic.get(topic)
            if not n:
                continue
            subscribers.sort()
            per, extra = divmod(n, len(subscribers))
            for i, mid in enumerate(subscribers):
                start = i * per + min(i, extra)
                length = per + (1 if i < extra else 0)
                out[mid] += [TopicPartition(topic, p) for p in range(start, start + length)]
        return out


@dataclass
class CooperativeStickyAssignor:
    name: str = "cooperative-sticky"
    cooperative: bool = True
    _last_target: dict[str, list[TopicPartition]] = field(default_factory=dict, repr=False)

    def assign(self, partitions_per_topic: Mapping[str, int],
               members: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        target, previous_owner = sticky_target(partitions_per_topic, members)
        self._last_target = target
        out: dict[str, list[TopicPartition]] = {}
        for mid, tps in target.items():
            out[mid] = [tp for tp in tps if previous_owner.get(tp, mid) == mid]
        return out


def sticky_target(partitions_per_topic: Mapping[str, int], members: Mapping[str, Subscription]
                  ) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str]]:
    """The balanced, sticky target assignment and the valid current owner of each partition."""
    subscribed = {mid: set(s.topics) for mid, s in members.items()}
    all_tps = [TopicPartition(t, p) for t in sorted(partitions_per_topic)
               for p in range(partitions_per_topic[t])
               if any(t in ts for ts in subscribed.values())]
    eligible: dict[TopicPartition, list[str]] = {
        tp: sorted(m for m, ts in subscribed.items() if tp.topic in ts) for tp in all_tps}
    valid = set(all_tps)
    owner: dict[TopicPartition, str] = {}
    # highest generation first: if two members claim a partition, the most recent claim wins
    for mid in sorted(members, key=lambda m: (-members[m].generation_id, m)):
        for tp in members[mid].owned_partitions:
            if tp in valid and tp not in owner and tp.topic in subscribed[mid]:
                owner[tp] = mid
    assignment: dict[str, set[TopicPartition]] = {m: set() for m in members}
    for tp, mid in owner.items():
        assignment[mid].add(tp)

    # quota: nobody keeps more than the balanced share of what it could hold
    # (done by the balancing loop below; first place what nobody owns)
    for tp in all_tps:
        if tp in owner:
            continue
        cands = eligible[tp]
        if not cands:
            continue
        best = min(cands, key=lambda m: (len(assignment[m]), m))
        assignment[best].add(tp)

    # move one partition at a time from a member that has at least two more than an eligible one
    moved = True
    while moved:
        moved = False
        for heavy in sorted(assignment, key=lambda m: (-len(assignment[m]), m)):
            for tp in sorted(assignment[heavy], reverse=True):
                light = min(eligible[tp], key=lambda m: (len(assignment[m]), m))
                if len(assignment[heavy]) - len(assignment[light]) > 1:
                    assignment[heavy].discard(tp)
                    assignment[light].add(tp)
                    moved = True
                    break
            if moved:
                break
    return {m: sorted(tps) for m, tps in assignment.items()}, owner


ASSIGNORS: dict[str, type[RangeAssignor] | type[CooperativeStickyAssignor]] = {
    "range": RangeAssignor, "cooperative-sticky": CooperativeStickyAssignor}


def make_assignors(names: Sequence[str]) -> list[RangeAssignor | CooperativeStickyAssignor]:
    """Assignor objects in preference order, from their protocol names."""
    out = []
    for n in names:
        if n not in ASSIGNORS:
            raise ValueError(f"unknown assignor {n!r}; known: {sorted(ASSIGNORS)}")
        out.append(ASSIGNORS[n]())
    return out
