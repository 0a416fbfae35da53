"""The replication state of one partition as this broker holds it: pure decisions, no I/O.

A partition's replica set, leader, epochs and ISR are decided by the controller and reach a
broker through the metadata image; what the *leader* decides on its own is everything that
depends on its followers' fetches: how far each follower has read (its log end), whether it is
caught up, when the high watermark may move, when to ask the controller to shrink or expand the
ISR, and whether an acks=all produce has been replicated enough. Those rules are Kafka's
(Partition.scala: updateFollowerFetchState, maybeIncrementLeaderHW, maybeShrinkIsr /
maybeExpandIsr with the "maximal ISR" of KIP-497 while an AlterPartition is in flight) and they
live here so that the simulation can drive them without sockets or a clock: every input carries
`now_ms`, every output is a value for the shell (Partition beside it, the replica manager) to
carry out.

A follower's own state is small (its leader and epoch, its high watermark = min(leader's HW,
own log end)); it is kept here too so that a partition has one object whatever its role.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from protocol.errors import ErrorCode
from storage.faults import broken

NO_LEADER = -1


class Role(Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    NONE = "none"  # not (or no longer) a replica of this partition here


# "Never caught up": far enough back that no lag window reaches it. Not 0, because times here are
# on the monotonic clock, whose origin is arbitrary: 0 may be only seconds ago (a fresh machine).
NEVER = -(1 << 62)

@dataclass(frozen=True, slots=True)
class Assignment:
    """A partition's state as the controller committed it (from the metadata image)."""

    replicas: tuple[int, ...]
    isr: frozenset[int]
    leader: int
    leader_epoch: int
    partition_epoch: int


@dataclass(slots=True)
class FollowerProgress:
    """What the leader knows of one follower, learnt from its fetches."""

    log_end_offset: int = -1
    log_start_offset: int = -1  # as its last fetch reported it (-1: not fetched yet)
    last_caught_up_ms: int = NEVER
    # The leader's log end when this follower last fetched: a fetch that reaches it proves the
    # follower was caught up at the time of that previous fetch (Kafka's lastFetchLeaderLogEndOffset).
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0
    # The follower's broker epoch as its last fetch stated it (Fetch v15+ ReplicaState, -1 when not
    # stated): what an AlterPartition names it with (KIP-903), so the controller refuses the
    # change if that incarnation of the broker is not its current one.
    broker_epoch: int = -1


@dataclass(frozen=True, slots=True)
class IsrChange:
    """An AlterPartition the leader wants the controller to commit."""

    leader_epoch: int
    partition_epoch: int
    new_isr: frozenset[int]


@dataclass(slots=True)
class _Pending:
    """An ISR change sent to the controller and not yet answered (KIP-497's pending state)."""

    change: IsrChange
    # Expanding: the new members already count for the high watermark and acks (maximal ISR);
    # shrinking: the leaving members still count until the controller has committed it.
    maximal_isr: frozenset[int]


@dataclass(slots=True)
class ReplicaState:
    """One partition's replication state on this broker (`local_id`)."""

    local_id: int
    replica_lag_time_max_ms: int = 30_000
    role: Role = Role.NONE
    assignment: Assignment | None = None
    high_watermark: int = 0
    leader_epoch_start_offset: int = 0
    followers: dict[int, FollowerProgress] = field(default_factory=dict)
    pending: _Pending | None = None
    # Brokers the metadata image says must not join an ISR (fenced, or shutting down: KIP-841).
    ineligible: frozenset[int] = frozenset()
    min_isr: int = 1  # the topic's min.insync.replicas

    # ---- what the metadata image decides -------------------------------------------------------
    def become_leader(self, a: Assignment, log_end_offset: int, high_watermark: int, now_ms: int) -> bool:
        """Take leadership (or a new epoch/partition epoch of it). Returns True if this is a new
        leader epoch, i.e. the caller must start a new epoch in the log and fail waiting requests.

        Followers in the ISR start as caught up "now" (Kafka resets their state on a leader
        change) so the leader does not shrink the ISR before they have had a chance to fetch from
        it; the others start as never caught up, so the high watermark does not wait for them
        until they have fetched up to the leader's log end.
        """
        new_epoch = self.role != Role.LEADER or self.assignment is None or \
            a.leader_epoch != self.assignment.leader_epoch
        self.role = Role.LEADER
        self.assignment = a
        self.pending = None
        if new_epoch:
            self.leader_epoch_start_offset = log_end_offset
            self.high_watermark = max(self.high_watermark, high_watermark)
            self.followers = {r: FollowerProgress(last_caught_up_ms=now_ms if r in a.isr else NEVER, last_fetch_ms=now_ms)
                              for r in a.replicas if r != self.local_id}
        else:
            for r in a.replicas:
                if r != self.local_id and r not in self.followers:
                    self.followers[r] = FollowerProgress(last_caught_up_ms=NEVER, last_fetch_ms=now_ms)
            for r in list(self.followers):
                if r not in a.replicas:
                    del self.followers[r]
        return new_epoch

    def become_follower(self, a: Assignment) -> bool:
        """Follow `a.leader`. Returns True if the leader or epoch changed (the fetcher must
        truncate by epoch before it fetches again)."""
        changed = self.role != Role.FOLLOWER or self.assignment is None or \
            (a.leader, a.leader_epoch) != (self.assignment.leader, self.assignment.leader_epoch)
        self.role = Role.FOLLOWER
        self.assignment = a
        self.followers = {}
        self.pending = None
        return changed

    def stop(self) -> None:
        self.role = Role.NONE
        self.followers = {}
        self.pending = None

    @property
    def leader_epoch(self) -> int:
        return self.assignment.leader_epoch if self.assignment else -1

    @property
    def leader(self) -> int:
        return self.assignment.leader if self.assignment else NO_LEADER

    @property
    def isr(self) -> frozenset[int]:
        return self.assignment.isr if self.assignment else frozenset()

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.pending.maximal_isr if self.pending else self.isr

    # ---- leader: follower fetches, the high watermark -----------------------------------------
    def on_follower_fetch(self, replica_id: int, fetch_offset: int, leader_log_end: int,
                          now_ms: int, log_start_offset: int = -1, broker_epoch: int = -1) -> bool:
        """Record a follower's fetch at `fetch_offset` (its log end) with its log start. Returns
        True if the high watermark moved. A fetch from a broker that is not a replica is the
        caller's error to answer (NOT_LEADER_OR_FOLLOWER / UNKNOWN...); here it changes nothing."""
        f = self.followers.get(replica_id)
        if self.role != Role.LEADER or f is None:
            return False
        f.log_start_offset = log_start_offset
        if broker_epoch != -1:  # a fetch stating none (restarted, not yet registered) keeps the last stated
            f.broker_epoch = broker_epoch
        if fetch_offset >= leader_log_end:
            f.last_caught_up_ms = max(f.last_caught_up_ms, now_ms)
        elif fetch_offset >= f.last_fetch_leader_leo:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.log_end_offset = fetch_offset
        f.last_fetch_leader_leo = leader_log_end
        f.last_fetch_ms = now_ms
        return self.maybe_advance_high_watermark(leader_log_end, now_ms)

    def on_repeated_fetch(self, replica_id: int, fetch_offset: int, leader_log_end: int, now_ms: int,
                          log_start_offset: int, broker_epoch: int) -> bool:
        """A fetch that moves nothing: an in-sync follower at our log end, the high watermark
        there too, asking again from where it asked before (most fetches of a follower session,
        which name every partition it follows). Only the time it was last caught up moves.
        False, with nothing done, when the fetch may move something (on_follower_fetch then)."""
        f = self.followers.get(replica_id)
        if f is None or self.role != Role.LEADER or fetch_offset != f.log_end_offset \
                or fetch_offset < leader_log_end or self.high_watermark < leader_log_end \
                or log_start_offset != f.log_start_offset or broker_epoch != f.broker_epoch \
                or replica_id not in self.isr:
            return False
        f.last_caught_up_ms = max(f.last_caught_up_ms, now_ms)
        f.last_fetch_leader_leo = leader_log_end
        f.last_fetch_ms = now_ms
        return True

    def member_epochs(self, isr: frozenset[int], own_epoch: int) -> list[tuple[int, int]]:
        """The ISR members of an AlterPartition with their broker epochs (KIP-903): this broker's
        own, and each follower's as its fetches last stated it — not as the metadata says now: a
        broker that crashed and registered again under a new epoch must not join the ISR on the
        strength of what its previous incarnation fetched. A later fetch stating none (the broker
        restarted, not yet registered) does not make it -1, which the controller cannot check: a
        change waiting behind the previous AlterPartition is sent with the epoch last stated,
        refused once the restarted broker has registered anew. -1 where no fetch stated one."""
        return [(r, own_epoch if r == self.local_id else
                 (f.broker_epoch if (f := self.followers.get(r)) is not None else -1)) for r in sorted(isr)]

    def _caught_up(self, f: FollowerProgress, leader_log_end: int, now_ms: int) -> bool:
        return f.log_end_offset >= leader_log_end or \
            now_ms - f.last_caught_up_ms <= self.replica_lag_time_max_ms

    def maybe_advance_high_watermark(self, leader_log_end: int, now_ms: int) -> bool:
        """The HW is the smallest log end among the leader and the followers it must wait for:
        those in the maximal ISR, and eligible ones that are caught up and about to join (so a
        follower about to enter the ISR cannot find the HW already past its log end). It never
        moves backwards, nor while the ISR is below min.insync.replicas (KIP-966, as Kafka 4.x):
        every replica that was in the ISR when it fell below holds everything up to the HW, so the
        controller may elect one of them (its eligible leader replicas) without losing what a
        consumer saw."""
        if self.role != Role.LEADER or len(self.isr) < self.min_isr:
            return False
        new_hw = leader_log_end
        wait_for = self.maximal_isr
        for r, f in self.followers.items():
            joining = r not in self.ineligible and self._caught_up(f, leader_log_end, now_ms)
            if f.log_end_offset < new_hw and (r in wait_for or joining) and not broken("hw"):
                new_hw = max(f.log_end_offset, 0)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def low_watermark(self, leader_log_start: int) -> int:
        """The smallest log start over this leader and its followers on live brokers (Kafka's
        lowWatermarkIfLeader; a follower that has not fetched yet counts as -1). DeleteRecords is
        answered once it reaches the requested offset: then no replica a failover could elect
        still holds the deleted records. Kafka leaves out fenced brokers only; here stopping ones
        are left out too (`ineligible`), as they can no longer be elected cleanly either."""
        low = leader_log_start
        for r, f in self.followers.items():
            if r not in self.ineligible and f.log_start_offset < low:
                low = f.log_start_offset
        return low

    def on_local_append(self, leader_log_end: int, now_ms: int) -> bool:
        """After the leader's own append: with no follower to wait for the HW moves at once."""
        return self.maybe_advance_high_watermark(leader_log_end, now_ms)

    # ---- leader: ISR changes ------------------------------------------------------------------
    def isr_expansion(self, leader_log_end: int) -> IsrChange | None:
        """Followers in sync but outside the ISR: ask to add them. In sync means its log end has
        reached the high watermark and the start of this leader's epoch (so it has truncated to
        this leader's history), and the broker is eligible: among other things its fetches state
        its broker epoch. A broker restarted and not yet registered fetches without one, and a
        member named with -1 is one the controller cannot check against its registration
        (KIP-903): a request held until that incarnation lost power and registered again put its
        torn log in the ISR (simulation seed 5430)."""
        if self.role != Role.LEADER or self.pending is not None or self.assignment is None:
            return None
        joining = {r for r, f in self.followers.items()
                   if r not in self.isr and r not in self.ineligible and f.broker_epoch != -1
                   and f.log_end_offset >= self.high_watermark
                   and f.log_end_offset >= self.leader_epoch_start_offset}
        if not joining:
            return None
        change = IsrChange(self.assignment.leader_epoch, self.assignment.partition_epoch,
                           frozenset(self.isr | joining))
        self.pending = _Pending(change, change.new_isr)
        return change

    def isr_shrink(self, leader_log_end: int, now_ms: int) -> IsrChange | None:
        """ISR followers that have not caught up within replica.lag.time.max.ms (or became
        ineligible): ask to remove them. The leader never removes itself."""
        if self.role != Role.LEADER or self.pending is not None or self.assignment is None:
            return None
        out = {r for r in self.isr if r != self.local_id and
               (r in self.ineligible or r not in self.followers or
                not self._caught_up(self.followers[r], leader_log_end, now_ms))}
        if not out:
            return None
        change = IsrChange(self.assignment.leader_epoch, self.assignment.partition_epoch,
                           frozenset(self.isr - out))
        self.pending = _Pending(change, self.isr)
        return change

    def on_isr_change_result(self, change: IsrChange, error: ErrorCode, committed: Assignment | None) -> None:
        """The controller answered our AlterPartition for `change`. On success the committed state
        replaces ours if it is newer; on any error the pending change is dropped (the metadata
        image will bring whatever the controller decided, and the next check proposes again).

        An answer for a change no longer pending (the image replaced it, and a newer one may be
        in flight) is ignored, as Kafka's handleAlterPartitionUpdate does: clearing the newer one
        would drop its members from the maximal ISR and let a second change go out beside it."""
        if self.pending is None or self.pending.change is not change:
            return
        self.pending = None
        if error == ErrorCode.NONE and committed is not None and self.assignment is not None and \
                committed.leader_epoch == self.assignment.leader_epoch and \
                committed.partition_epoch > self.assignment.partition_epoch:
            self.assignment = committed

    # ---- leader: acks=all ---------------------------------------------------------------------
    def check_min_isr(self, min_insync_replicas: int) -> ErrorCode:
        """Before an acks=all append: refuse when the ISR is already too small to keep it safe."""
        if len(self.isr) < min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE

    def acks_all_outcome(self, required_offset: int, min_insync_replicas: int) -> ErrorCode | None:
        """An acks=all produce whose last offset is `required_offset - 1`: None while it must
        still wait; NONE once replicated; NOT_ENOUGH_REPLICAS_AFTER_APPEND if it was replicated
        only after the ISR fell below min.insync.replicas (the data is there, durability is not
        what the producer asked for); NOT_LEADER_OR_FOLLOWER if leadership was lost meanwhile."""
        if self.role != Role.LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark < required_offset:
            return None
        if len(self.maximal_isr) < min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    # ---- follower ------------------------------------------------------------------------------
    def on_leader_high_watermark(self, leader_hw: int, local_log_end: int) -> bool:
        """A follower's HW is the leader's, bounded by what it has itself."""
        if self.role != Role.FOLLOWER:
            return False
        hw = min(leader_hw, local_log_end)
        if hw > self.high_watermark:
            self.high_watermark = hw
            return True
        return False

    def on_log_start(self, offset: int) -> None:
        """The follower's log start followed the leader's to `offset`: everything below it was
        committed on the leader, so the high watermark is at least there."""
        self.high_watermark = max(self.high_watermark, offset)

    def on_truncate(self, offset: int) -> None:
        """The local log was cut back to `offset` (divergence after a leader change)."""
        self.high_watermark = min(self.high_watermark, offset)

    def set_ineligible(self, brokers: Iterable[int]) -> None:
        self.ineligible = frozenset(brokers)
