"""What the parts of the group coordinator's state machine share, and nothing more: the settings,
the timers, and the table of groups this broker serves with the effects buffered for the shell.
The parts (membership.py, offsets.py, loading.py) are separate objects, each handed the table and
the peers it needs behind a small Protocol of its own; state.py composes them. No I/O anywhere
(docs/architecture.md §3)."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from protocol.errors import ErrorCode

from ..partitioning import partition_for
from . import records as rec
from .model import Effects, Group, GroupState, JoinResult, Loading, Now, SyncResult, Write

E = ErrorCode
EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE,
    GroupState.DEAD,
)
TimerKey = tuple[str, ...]
EXPIRE: TimerKey = ("expire",)  # the periodic retention check; every other timer is membership's


@dataclass(frozen=True, slots=True)
class Settings:
    num_partitions: int = 50
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    offsets_retention_ms: int = 10080 * 60 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    max_group_size: int = 2_147_483_647  # Kafka's group.max.size; its default is Integer.MAX_VALUE
    # KIP-848 consumer groups: the session and heartbeat interval are the broker's, not the client's
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default
    # Kafka's group.consumer.migration.policy: may a group with members change protocol
    # (disabled, upgrade, downgrade, bidirectional; bidirectional is Kafka 4's default)
    consumer_migration_policy: str = "bidirectional"
    # KIP-932 share groups (group.share.session.timeout.ms, group.share.heartbeat.interval.ms)
    share_session_timeout_ms: int = 45000
    share_heartbeat_interval_ms: int = 5000


class Timers:
    """Deadlines by key, on the monotonic clock: scheduling a key again moves its deadline, and what that leaves behind in
    the heap is skipped when it comes up."""

    def __init__(self) -> None:
        self._at: dict[TimerKey, int] = {}
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._seq = itertools.count()

    def schedule(self, key: TimerKey, at: int, *, earlier_only: bool = False) -> None:
        cur = self._at.get(key)
        if earlier_only and cur is not None and cur <= at:
            return
        self._at[key] = at
        heapq.heappush(self._heap, (at, next(self._seq), key))

    def cancel(self, key: TimerKey) -> None:
        self._at.pop(key, None)

    def next_deadline(self) -> int | None:
        heap = self._heap
        while heap and self._at.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def pop_due(self, now: int) -> Iterator[TimerKey]:
        """Each timer due at `now`, taken off as it is handed out: its handler may schedule more,
        and those due by `now` come out of this same call."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, _, key = heapq.heappop(heap)
            if self._at.get(key) == at:
                del self._at[key]
                yield key


class GroupTable:
    """The groups of the `__consumer_offsets` partitions this broker serves, which partitions those
    are (owned, or still being read back), the timers, and the effects for the shell."""

    def __init__(self, settings: Settings, lease_held: Callable[[], bool],
                 opening: Callable[[int], bool] = lambda i: False) -> None:
        self.settings = settings
        self._lease_held = lease_held  # the broker's claim on its partitions is current (lifecycle.py)
        # the metadata names this broker the partition's leader, its log not yet open (log_io.py)
        self._opening = opening
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()
        self.loading: dict[int, Loading] = {}
        self.active = True
        self.timers = Timers()
        self._fx = Effects()

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.settings.num_partitions)

    def coordinator_error(self, group_id: str) -> int:
        """0 if this broker serves the group now; else the error that sends the client elsewhere
        (NOT_COORDINATOR) or makes it retry (COORDINATOR_LOAD_IN_PROGRESS / _NOT_AVAILABLE)."""
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE
        p = self.partition_for(group_id)
        if p in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self.owned and self._opening(p) and self._lease_held():
            return E.COORDINATOR_LOAD_IN_PROGRESS  # about to load: FindCoordinator already names us
        if p not in self.owned or not self._lease_held():
            # with its lease lapsed the broker may have been replaced as the partition's leader:
            # what it holds of the group may be stale, and the client must look again
            return E.NOT_COORDINATOR
        return 0

    def check_retention(self, now: Now) -> None:
        """The next retention check comes one interval from `now`, if none comes sooner."""
        self.timers.schedule(EXPIRE, now.mono + self.settings.offsets_retention_check_interval_ms, earlier_only=True)

    def reply(self, token: int, result: JoinResult | SyncResult) -> None:
        self._fx.replies.append((token, result))

    def write(self, partition: int, key: rec.Key, value: bytes | None) -> None:
        """A record for `__consumer_offsets`; value None is a tombstone."""
        self._fx.writes.append(Write(partition, rec.encode_key(key), value))

    def drain(self) -> Effects:
        """The effects accumulated since the last drain: records to write, then replies."""
        fx, self._fx = self._fx, Effects()
        return fx
