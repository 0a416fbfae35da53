"""What every part of the group coordinator's state machine shares: the groups, ownership of
`__consumer_offsets` partitions, timers, the effects buffer, and the small helpers that more than
one part uses. The parts (membership, offsets, loading) are mixins over this class; state.py
composes them into GroupStateMachine. No I/O anywhere (docs/architecture.md §3)."""

from __future__ import annotations

import heapq
import itertools
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from protocol.errors import ErrorCode

from ..partitioning import partition_for
from . import records as rec
from .loading_state import Loading
from .model import (
    Effects,
    Group,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
    Write,
)
from .subscriptions import CONSUMER_PROTOCOL_TYPE, subscribed_topics

E = ErrorCode
EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE,
    GroupState.DEAD,
)
NO_OFFSET = -1
# A member's first JoinGroup may wait a whole rebalance; it cannot heartbeat meanwhile, so it gets
# this long (Kafka's fixed value) instead of its session timeout before it is given up on.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE: all of them, no ACLs yet


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


TimerKey = tuple[str, ...]


class GroupCore(ABC):
    """Every group of the `__consumer_offsets` partitions this broker owns."""

    def __init__(self, settings: Settings, partition_exists: Callable[[str, int], bool],
                 new_member_id: Callable[[str], str] | None = None,
                 lease_held: Callable[[], bool] = lambda: True) -> None:
        self.settings = settings
        self._partition_exists = partition_exists
        self._lease_held = lease_held  # the broker's claim on its partitions is current (lifecycle.py)
        self._new_member_id = new_member_id or (lambda prefix: f"{prefix}-{uuid.uuid4()}")
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()
        self.loading: dict[int, Loading] = {}
        self.active = True
        self._txn_groups: dict[int, set[str]] = {}  # producer id -> groups with its pending offsets
        self._fx = Effects()
        self._timers: dict[TimerKey, int] = {}
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._seq = itertools.count()

    def _schedule(self, key: TimerKey, at: int, *, earlier_only: bool = False) -> None:
        cur = self._timers.get(key)
        if earlier_only and cur is not None and cur <= at:
            return
        self._timers[key] = at
        heapq.heappush(self._heap, (at, next(self._seq), key))

    def _cancel(self, key: TimerKey) -> None:
        self._timers.pop(key, None)

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
        if p not in self.owned or not self._lease_held():
            # with its lease lapsed the broker may have been replaced as the partition's leader:
            # what it holds of the group may be stale, and the client must look again
            return E.NOT_COORDINATOR
        return 0

    def _heartbeat(self, g: Group, m: Member, now: int, timeout: int | None = None) -> None:
        m.session_deadline = now + (m.session_timeout_ms if timeout is None else timeout)
        self._schedule(("member", g.group_id, m.member_id), m.session_deadline, earlier_only=True)

    def _fenced(self, g: Group, group_instance_id: str | None, member_id: str) -> bool:
        if group_instance_id is None:
            return False
        cur = g.static_members.get(group_instance_id)
        return cur is not None and cur != member_id

    def _transition(self, g: Group, state: GroupState, now: int) -> None:
        g.state = state
        g.state_timestamp = now

    def _reply(self, token: int, result: JoinResult | SyncResult) -> None:
        self._fx.replies.append((token, result))

    def _write_group(self, g: Group) -> None:
        members = () if g.state is EMPTY and not g.members else tuple(
            rec.MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                            m.session_timeout_ms, m.metadata(g.protocol_name), m.assignment)
            for m in g.members.values())
        value = rec.GroupValue(g.protocol_type or "", g.generation, g.protocol_name, g.leader, g.state_timestamp,
                               members)
        self._fx.writes.append(Write(g.partition, rec.encode_key(rec.GroupKey(g.group_id)),
                                     rec.encode_group_value(value)))

    def _delete_group(self, g: Group, now: int) -> None:
        self._transition(g, DEAD, now)
        for pid in g.txn_pending:
            groups = self._txn_groups.get(pid)
            if groups is not None:
                groups.discard(g.group_id)
        g.txn_pending.clear()
        self._fx.writes.append(Write(g.partition, rec.encode_key(rec.GroupKey(g.group_id)), None))
        del self.groups[g.group_id]
        self._cancel(("join", g.group_id))
        self._cancel(("sync", g.group_id))

    def _subscribed(self, g: Group, topic: str) -> bool:
        """Kafka's ClassicGroup.isSubscribedToTopic: unknown subscriptions count as "all topics"
        for the consumer protocol (it cannot rule any out) and as "none" for any other."""
        if g.subscribed_topics is None:
            return g.protocol_type == CONSUMER_PROTOCOL_TYPE
        return topic in g.subscribed_topics

    def _snapshot_subscriptions(self, g: Group) -> None:
        """Taken when a generation starts (and at load), as Kafka does: during a rebalance the
        subscriptions of the generation still assigned are the ones that count."""
        g.subscribed_topics = subscribed_topics(g.group_id, g.protocol_type, g.protocol_name,
                                                (m.metadata(g.protocol_name) for m in g.members.values()))

    @abstractmethod
    def _prepare_rebalance(self, g: Group, now: int) -> None:
        """Membership's: loading a group whose members exceed the size limit starts a rebalance."""
