"""A consumer's membership in a KIP-848 consumer group, sans-IO: what its next
ConsumerGroupHeartbeat says, what an answer changes, and the steps that take the partitions the
application holds to the assignment the coordinator gives.

group_consumer.py sends what this object says and runs the steps it names (the listener, the
commits); everything here is plain state, unit-tested without a broker
(tests/unit/test_client_consumer_membership.py).

* Epochs: 0 joins (with the subscription, the rebalance timeout and no owned partitions), the
  member epoch the coordinator answers goes back on every later heartbeat, -1 leaves, -2 leaves
  for a while (a static member, whose place and partitions wait for it). The member id is the
  client's own (KIP-1082), kept when a fenced member joins again.
* Reconciliation: the coordinator's assignment is a target. Partitions the member holds and the
  target no longer has are revoked first (the application commits and is told), and only then
  are the new ones taken; every heartbeat lists what the member holds at that moment, which is
  how a revocation is acknowledged (the coordinator gives a revoked partition to another member
  only once its owner stopped listing it).
* Fencing: FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID mean the partitions are someone else's
  already. The member stops heartbeating until the application has been told they are lost,
  then joins again at epoch 0 owning nothing.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
TopicIdPartition = tuple[uuid.UUID, int]


class HeartbeatOutcome(enum.Enum):
    OK = "ok"
    FIND_COORDINATOR = "find-coordinator"  # the coordinator moved or is not there: look it up, retry
    RETRY = "retry"                        # loading, or timed out: the same heartbeat after a backoff
    FENCED = "fenced"                      # the partitions are lost: tell the application, then rejoin
    FATAL = "fatal"                        # the member cannot go on (authorization, bad assignor, ...)


class Phase(enum.Enum):
    IDLE = "idle"        # no subscription: not in the group
    JOINING = "joining"  # the next heartbeat has epoch 0
    MEMBER = "member"    # in the group at `epoch`
    FENCED = "fenced"    # out of the group; rejoins once the application was told of its loss


_FIND = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT})
_FENCED = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH})


@dataclass(frozen=True, slots=True)
class HeartbeatFields:
    """What the next ConsumerGroupHeartbeat carries; None is "unchanged since the last one"."""

    member_epoch: int
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: list[TopicIdPartition]


@dataclass(frozen=True, slots=True)
class Step:
    """One step of reconciliation: revoke these, or (nothing left to revoke) assign these."""

    revoke: frozenset[TopicIdPartition] = frozenset()
    assign: frozenset[TopicIdPartition] = frozenset()


@dataclass(slots=True)
class ConsumerMembership:
    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    instance_id: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    topics: tuple[str, ...] = ()
    regex: str | None = None
    phase: Phase = Phase.IDLE
    epoch: int = JOIN_EPOCH
    heartbeat_interval_ms: int = 5000
    owned: frozenset[TopicIdPartition] = frozenset()  # what the application holds now
    target: frozenset[TopicIdPartition] | None = None  # the coordinator's last assignment
    _sent: tuple[tuple[str, ...], str | None] | None = None  # the subscription the coordinator has

    # ---- subscription ----------------------------------------------------------------------
    def subscribe(self, topics: Iterable[str] = (), regex: str | None = None) -> None:
        self.topics, self.regex = tuple(sorted(set(topics))), regex or None
        if self.phase is Phase.IDLE and self.subscribed:
            self.phase = Phase.JOINING

    def unsubscribe(self) -> None:
        """No subscription: the application dropped its partitions; a member leaves with the next
        heartbeat (epoch -1), anyone else just stops."""
        self.topics, self.regex = (), None
        self.owned = frozenset()
        if self.phase is not Phase.MEMBER:
            self.phase = Phase.IDLE
            self.epoch = JOIN_EPOCH

    @property
    def subscribed(self) -> bool:
        return bool(self.topics or self.regex)

    @property
    def in_group(self) -> bool:
        return self.phase is Phase.MEMBER and self.epoch > 0

    # ---- heartbeats ------------------------------------------------------------------------
    def wants_heartbeat(self) -> bool:
        """Nothing is sent while out of the group: idle, or fenced and the loss not yet handled."""
        return self.phase in (Phase.JOINING, Phase.MEMBER)

    def heartbeat(self) -> HeartbeatFields:
        """The next heartbeat: everything on a join, else the subscription only when it changed,
        and always the partitions held (an unchanged list is how a member says it still holds
        them; a shorter one acknowledges a revocation)."""
        if self.phase is Phase.MEMBER and not self.subscribed:
            return HeartbeatFields(LEAVE_EPOCH, -1, None, None, None, [])
        joining = self.phase is Phase.JOINING
        sub = (self.topics, self.regex)
        full = joining or sub != self._sent
        return HeartbeatFields(
            member_epoch=JOIN_EPOCH if joining else self.epoch,
            rebalance_timeout_ms=self.rebalance_timeout_ms if joining else -1,
            subscribed_topic_names=list(self.topics) if full else None,
            # "" clears a regex (null is "unchanged")
            subscribed_topic_regex=(self.regex or ("" if not joining else None)) if full else None,
            server_assignor=self.server_assignor if joining else None,
            owned=[] if joining else sorted(self.owned))

    def on_response(self, error: int, member_epoch: int, interval_ms: int,
                    assignment: Iterable[TopicIdPartition] | None, sent: HeartbeatFields) -> HeartbeatOutcome:
        """Apply a heartbeat's answer; `sent` is what that heartbeat carried."""
        code = ErrorCode(error)
        if code == ErrorCode.NONE:
            if self.phase not in (Phase.JOINING, Phase.MEMBER):
                return HeartbeatOutcome.OK  # answered after a fence or a leave: stale
            if sent.member_epoch < 0:
                self.left()
                return HeartbeatOutcome.OK
            self.phase = Phase.MEMBER
            self.epoch = member_epoch
            if interval_ms > 0:
                self.heartbeat_interval_ms = interval_ms
            if sent.subscribed_topic_names is not None:
                self._sent = (tuple(sent.subscribed_topic_names), sent.subscribed_topic_regex or None)
            if assignment is not None:  # null: unchanged
                self.target = frozenset(assignment)
            return HeartbeatOutcome.OK
        if code in _FIND:
            return HeartbeatOutcome.FIND_COORDINATOR
        if code in _RETRY:
            return HeartbeatOutcome.RETRY
        if code in _FENCED:
            self.fence()
            return HeartbeatOutcome.FENCED
        return HeartbeatOutcome.FATAL

    def fence(self) -> None:
        """Out of the group: no heartbeat until `rejoin()`; what is held is to be reported lost."""
        if self.phase is Phase.IDLE:
            return
        self.phase = Phase.FENCED
        self.target = None
        self._sent = None

    # ---- reconciliation --------------------------------------------------------------------
    def next_step(self) -> Step | None:
        """What to do next towards the target: revoke first, then assign; None when there."""
        if self.phase is not Phase.MEMBER or self.target is None:
            return None
        revoke = self.owned - self.target
        if revoke:
            return Step(revoke=revoke)
        assign = self.target - self.owned
        return Step(assign=assign) if assign else None

    def revoked(self, tps: Iterable[TopicIdPartition]) -> None:
        """The application gave these up (committed, told): the next heartbeat no longer lists them."""
        self.owned -= frozenset(tps)

    def assigned(self, tps: Iterable[TopicIdPartition]) -> frozenset[TopicIdPartition]:
        """The application takes these: those of the current target (a newer answer may have taken
        some away meanwhile), which are returned."""
        taken = frozenset(tps) & (self.target or frozenset())
        self.owned |= taken
        return taken

    @property
    def lost(self) -> frozenset[TopicIdPartition]:
        """Fenced: the partitions the application still holds, which are no longer its own."""
        return self.owned if self.phase is Phase.FENCED else frozenset()

    def rejoin(self) -> None:
        """The application was told of the loss: join again at epoch 0, under the same member id."""
        if self.phase is not Phase.FENCED:
            return
        self.owned = frozenset()
        self.epoch = JOIN_EPOCH
        self.phase = Phase.JOINING if self.subscribed else Phase.IDLE

    # ---- leaving ---------------------------------------------------------------------------
    def leave_epoch(self) -> int | None:
        """The epoch of the leaving heartbeat: -2 keeps a static member's place for its return, -1
        gives the partitions up at once; None when not in the group (nothing to send)."""
        if not self.in_group:
            return None
        return STATIC_LEAVE_EPOCH if self.instance_id is not None else LEAVE_EPOCH

    def left(self) -> None:
        """Out of the group, owning nothing; joins again if subscribed meanwhile."""
        self.phase = Phase.JOINING if self.subscribed else Phase.IDLE
        self.epoch = JOIN_EPOCH
        self.owned = frozenset()
        self.target = None
        self._sent = None


__all__ = ["JOIN_EPOCH", "LEAVE_EPOCH", "STATIC_LEAVE_EPOCH", "ConsumerMembership", "HeartbeatFields",
           "HeartbeatOutcome", "Phase", "Step", "TopicIdPartition"]
