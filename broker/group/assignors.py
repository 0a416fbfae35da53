"""The server-side assignors of KIP-848 consumer groups (`group.consumer.assignors`): from the members'
subscriptions, the topics' partitions and the previous target assignment, the next target assignment.

Pure functions over ids: a partition is (topic id, index), so that a topic deleted and created again
under the same name is another topic. Both are deterministic (sorted members and topics), so that a
coordinator that reloads a group and recomputes gets what its predecessor got.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

Partition = tuple[uuid.UUID, int]
Assignment = frozenset[Partition]
TopicMeta = tuple[uuid.UUID, int]  # topic id, number of partitions


def _partitions(topics: Mapping[str, TopicMeta], names: frozenset[str]) -> list[Partition]:
    return [(topics[n][0], i) for n in sorted(names) if n in topics for i in range(topics[n][1])]


def uniform(subscriptions: Mapping[str, frozenset[str]], topics: Mapping[str, TopicMeta],
            previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Balanced and sticky: each member keeps what it had as long as it still subscribes to it and
    keeping it leaves the member no more than one partition above any other member that could take
    it; the rest goes to the eligible member with the fewest. With the same subscriptions everywhere
    the counts differ by at most one."""
    members = sorted(subscriptions)
    eligible: dict[Partition, list[str]] = {}
    for m in members:
        for p in _partitions(topics, subscriptions[m]):
            eligible.setdefault(p, []).append(m)
    owned: dict[str, set[Partition]] = {m: set() for m in members}
    free: list[Partition] = []
    taken: set[Partition] = set()
    for m in members:  # what each member keeps from before
        for p in sorted(previous.get(m, ())):
            if p in eligible and m in eligible[p] and p not in taken:
                owned[m].add(p)
                taken.add(p)
    free = [p for p in sorted(eligible) if p not in taken]
    for p in free:
        target = min(eligible[p], key=lambda m: (len(owned[m]), m))
        owned[target].add(p)
    # one partition at a time from the fullest member to the emptiest that may take it, until no
    # two such members differ by two: each move takes from a member that has more than its share
    while (move := _one_move(members, owned, eligible)) is not None:
        p, src, dst = move
        owned[src].discard(p)
        owned[dst].add(p)
    return {m: frozenset(ps) for m, ps in owned.items()}


def _one_move(members: list[str], owned: dict[str, set[Partition]],
              eligible: dict[Partition, list[str]]) -> tuple[Partition, str, str] | None:
    for m in sorted(members, key=lambda m: (-len(owned[m]), m)):
        for p in sorted(owned[m]):
            to = min(eligible[p], key=lambda o: (len(owned[o]), o))
            if len(owned[m]) - len(owned[to]) >= 2:
                return p, m, to
    return None


def range_(subscriptions: Mapping[str, frozenset[str]], topics: Mapping[str, TopicMeta],
           previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Per topic, the members subscribed to it (sorted by member id) take contiguous ranges, the
    first ones one partition more when the count does not divide: members subscribed to several
    topics with the same partition count get the same indexes of each (co-partitioning)."""
    out: dict[str, set[Partition]] = {m: set() for m in subscriptions}
    for name in sorted({n for names in subscriptions.values() for n in names}):
        if name not in topics:
            continue
        topic_id, count = topics[name]
        subs = sorted(m for m, names in subscriptions.items() if name in names)
        per, extra = divmod(count, len(subs))
        start = 0
        for i, m in enumerate(subs):
            n = per + (1 if i < extra else 0)
            out[m].update((topic_id, p) for p in range(start, start + n))
            start += n
    return {m: frozenset(ps) for m, ps in out.items()}


def simple(subscriptions: Mapping[str, frozenset[str]], topics: Mapping[str, TopicMeta]) -> dict[str, Assignment]:
    """Kafka's SimpleAssignor for share groups: per topic, its subscribed members (sorted) and its
    partitions in turn. With more partitions than members each partition goes to one member; with
    more members than partitions every member gets one, and members share the partitions — share
    groups deliver each record to one member whatever the assignment, so sharing is safe."""
    out: dict[str, set[Partition]] = {m: set() for m in subscriptions}
    for name in sorted({n for names in subscriptions.values() for n in names}):
        if name not in topics:
            continue
        topic_id, count = topics[name]
        subs = sorted(m for m, names in subscriptions.items() if name in names)
        if not count:
            continue
        for i in range(max(count, len(subs))):
            out[subs[i % len(subs)]].add((topic_id, i % count))
    return {m: frozenset(ps) for m, ps in out.items()}


Assignor = Callable[[Mapping[str, frozenset[str]], Mapping[str, TopicMeta], Mapping[str, Assignment]],
                    dict[str, Assignment]]
ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
