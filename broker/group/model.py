"""The nouns of the group coordinator: groups, members, offsets, and what events give back.

Kept apart from the state machine (state.py) so the rules there read as rules, and so the
asyncio wrapper and the handlers can import the result types without the logic.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from protocol.clock import Clock
from protocol.topic_partition import TopicPartition

from . import records as rec
from .consumer_model import ConsumerGroupData
from .share_model import ShareGroupData
from .subscriptions import CONSUMER_PROTOCOL_TYPE, subscribed_topics


@dataclass(frozen=True, slots=True)
class Now:
    """The clock as one event reads it. `wall` for what is written down or shown (commit and state
    timestamps, and the retention rule that compares with them); `mono` for every deadline (sessions,
    rebalances, the retention check's period), so that setting the system clock neither ends nor
    extends them."""

    wall: int
    mono: int

    @classmethod
    def of(cls, clock: Clock) -> Now:
        return cls(clock.now_ms(), clock.monotonic_ms())


class GroupState(enum.Enum):
    """Kafka's classic group states; the values are the names DescribeGroups/ListGroups show."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class OffsetEntry:
    """A committed offset. log_position is where its record sits in `__consumer_offsets`: when a
    transactional commit and a plain one race for a partition, the later record wins."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1
    log_position: int = -1


@dataclass(frozen=True, slots=True)
class OffsetCommitIn:
    """One partition of an OffsetCommit / TxnOffsetCommit request."""

    offset: int
    leader_epoch: int = -1
    metadata: str | None = None
    commit_timestamp: int = -1  # v1 only: the client's timestamp; -1 = now


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_token: int | None = None  # a JoinGroup parked until the join phase completes
    sync_token: int | None = None  # a SyncGroup parked until the leader's assignment is stored
    is_new: bool = False  # joined but not yet through a completed join phase
    session_deadline: int = 0

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass(slots=True)
class Group:
    group_id: str
    partition: int
    state: GroupState = GroupState.EMPTY
    state_timestamp: int = -1
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)  # told MEMBER_ID_REQUIRED, not joined yet
    pending_sync: set[str] = field(default_factory=set)  # joined this generation, not synced yet
    offsets: dict[TopicPartition, OffsetEntry] = field(default_factory=dict)
    txn_pending: dict[int, dict[TopicPartition, OffsetEntry]] = field(default_factory=dict)  # producer id ->
    # the members' topics as of the current generation (consumer protocol); None: unknown, which
    # OffsetDelete takes as "every topic" for a consumer group and "none" for any other
    subscribed_topics: frozenset[str] | None = None
    in_initial_delay: bool = False
    initial_delay_remaining: int = 0
    new_member_added: bool = False
    # set: a KIP-848 consumer group (consumer.py), whose members are there and not in `members`;
    # `state` is then Empty or Stable only, for the offsets' rules (retention, deletion)
    consumer: ConsumerGroupData | None = None
    # set: a KIP-932 share group (share.py), the same way; it has no committed offsets
    share: ShareGroupData | None = None

    def rebalance_timeout(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.join_token is not None for m in self.members.values())

    def has_pending_txn(self, tp: TopicPartition) -> bool:
        return any(tp in offs for offs in self.txn_pending.values())

    def transition(self, state: GroupState, now: Now) -> None:
        self.state = state
        self.state_timestamp = now.wall

    def fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """Another member id holds this instance id now: the caller is an old incarnation."""
        if group_instance_id is None:
            return False
        cur = self.static_members.get(group_instance_id)
        return cur is not None and cur != member_id

    def subscribes_to(self, topic: str) -> bool:
        """Kafka's ClassicGroup.isSubscribedToTopic: unknown subscriptions count as "all topics"
        for the consumer protocol (it cannot rule any out) and as "none" for any other."""
        if self.subscribed_topics is None:
            return self.protocol_type == CONSUMER_PROTOCOL_TYPE
        return topic in self.subscribed_topics

    def snapshot_subscriptions(self) -> None:
        """Taken when a generation starts (and at load), as Kafka does: during a rebalance the
        subscriptions of the generation still assigned are the ones that count."""
        self.subscribed_topics = subscribed_topics(self.group_id, self.protocol_type, self.protocol_name,
                                                   (m.metadata(self.protocol_name) for m in self.members.values()))


@dataclass(slots=True)
class Loading:
    """What has been read back from one `__consumer_offsets` partition so far, by the load of
    one election (`coordinator_epoch`, the partition's leader epoch): a load of an earlier
    election still running must not add to it."""

    coordinator_epoch: int
    groups: dict[str, rec.GroupValue | None] = field(default_factory=dict)
    offsets: dict[str, dict[TopicPartition, OffsetEntry | None]] = field(default_factory=dict)
    txn: dict[int, dict[str, dict[TopicPartition, OffsetEntry]]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: int
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool  # JoinGroup v4+ without an instance id


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]


@dataclass(frozen=True, slots=True)
class Write:
    """A record for `__consumer_offsets` partition `partition`; value None is a tombstone."""

    partition: int
    key: bytes
    value: bytes | None


@dataclass(slots=True)
class Effects:
    """What the wrapper must do after feeding an event: write the records (first), then hand the
    parked requests their results."""

    writes: list[Write] = field(default_factory=list)
    replies: list[tuple[int, JoinResult | SyncResult]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.writes or self.replies)


@dataclass(slots=True)
class CommitPlan:
    """An offset commit checked and encoded but not yet applied: it becomes visible only once
    its records are in the log (offsets_written), so a failed write stores nothing."""

    group_id: str
    partition: int
    errors: dict[TopicPartition, int]
    staged: dict[TopicPartition, OffsetEntry]
    writes: list[Write]
    producer_id: int = -1  # >= 0: a transactional commit, pending until its marker
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol_name: str
    members: tuple[MemberSummary, ...]


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: int
