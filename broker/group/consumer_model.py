"""The nouns of KIP-848 consumer groups and the one rule that moves a member towards its target:
Kafka's reconciliation (its CurrentAssignmentBuilder), as a pure function.

A member holds `assigned` (partitions it may consume now) and `pending_revocation` (partitions it
must give up before its epoch may advance). A partition is given to a member only once no other
member holds it in either set, so no partition is ever owned by two members at once; a member's
revocation is acknowledged by a heartbeat whose owned partitions no longer list it.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from .assignors import Assignment, Partition, TopicMeta

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's MemberState values, as ConsumerGroupCurrentMemberAssignmentValue stores them."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class ClassicMeta:
    """A member of a consumer group that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat),
    after an online upgrade or joining one: its session timeout and JoinGroup protocols, as Kafka's
    ClassicMemberMetadata stores them."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = frozenset()
    pending_revocation: Assignment = frozenset()
    classic: ClassicMeta | None = None

    def subscribed(self, topics: Mapping[str, TopicMeta]) -> frozenset[str]:
        """The existing topics this member subscribes to, by name or by its regex (full match, as
        RE2/J's matches(); internal topics, `__`-prefixed, are never matched by a regex)."""
        names = {n for n in self.subscribed_topic_names if n in topics}
        if self.subscribed_topic_regex:
            pattern = compile_regex(self.subscribed_topic_regex)
            if pattern is not None:
                names.update(n for n in topics if not n.startswith("__") and pattern.fullmatch(n))
        return frozenset(names)


_REGEXES: dict[str, re.Pattern[str] | None] = {}


def compile_regex(regex: str) -> re.Pattern[str] | None:
    """Python's re stands in for RE2/J; None for a pattern it cannot compile (INVALID_REGULAR_EXPRESSION)."""
    if regex not in _REGEXES:
        try:
            _REGEXES[regex] = re.compile(regex)
        except re.error:
            _REGEXES[regex] = None
    return _REGEXES[regex]


@dataclass(slots=True)
class ConsumerGroupData:
    """What a consumer group is beyond its offsets (which live in model.Group with a classic group's)."""

    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> target assignment
    # the subscribed topics as of the group epoch: a change (a topic created that a regex matches,
    # partitions added) bumps the epoch and recomputes the target
    subscription_metadata: dict[str, TopicMeta] = field(default_factory=dict)

    def state(self) -> str:
        """Kafka's ConsumerGroupState names (ListGroups, ConsumerGroupDescribe)."""
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values() if m.member_epoch >= 0):
            return "Reconciling"
        return "Stable"

    def owner_of(self, p: Partition, besides: str) -> str | None:
        """The member other than `besides` that holds `p` (assigned or still revoking), if any."""
        for m in self.members.values():
            if m.member_id != besides and (p in m.assigned or p in m.pending_revocation):
                return m.member_id
        return None


def owns_any(owned: Iterable[Partition] | None, revoking: Assignment) -> bool:
    """Does the member still report one of `revoking`? Unknown (owned None) counts as yes."""
    return owned is None or any(p in revoking for p in owned)


def reconcile(member: ConsumerMember, target: Assignment, target_epoch: int,
              owned: frozenset[Partition] | None, held_elsewhere: frozenset[Partition]) -> ConsumerMember:
    """The member's next state towards `target` (of `target_epoch`), given what it reported owning
    (`owned`, None when the heartbeat did not say) and the partitions other members still hold."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target, target_epoch, owned, held_elsewhere)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target, target_epoch, owned, held_elsewhere)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target, target_epoch, owned, held_elsewhere)
    return _next(member, target_epoch, target, target_epoch, owned, held_elsewhere)


def _next(member: ConsumerMember, epoch: int, target: Assignment, target_epoch: int,
          owned: frozenset[Partition] | None, held_elsewhere: frozenset[Partition]) -> ConsumerMember:
    keep = member.assigned & target
    revoke = member.assigned - keep
    wanted = target - keep
    unreleased = wanted & held_elsewhere
    add = wanted - unreleased
    if revoke and owns_any(owned, revoke):
        # revoke first, at the current epoch: nothing new until the member says it let them go
        return _moved(member, MemberState.UNREVOKED_PARTITIONS, epoch, keep, revoke)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _moved(member, state, target_epoch, keep | add, frozenset())


def _moved(member: ConsumerMember, state: MemberState, epoch: int, assigned: Assignment,
           revoking: Assignment) -> ConsumerMember:
    previous = member.member_epoch if epoch != member.member_epoch else member.previous_member_epoch
    return replace(member, state=state, member_epoch=epoch, previous_member_epoch=previous, assigned=assigned,
                   pending_revocation=revoking)
