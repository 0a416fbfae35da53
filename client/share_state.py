"""The ShareConsumer's decisions, sans-IO (KIP-932): its membership in the share group, its share
session with each broker, and the acknowledgements it owes.

share_consumer.py sends what these objects say and feeds them the answers; everything here is
plain state, unit-tested without a broker (tests/unit/test_client_share_state.py).

* `ShareMembership`: ShareGroupHeartbeat's epochs. Epoch 0 joins (with the subscription), the
  member epoch the coordinator answers is sent back on every later heartbeat, -1 leaves. The member
  id is the client's own (Kafka 4.1's clients make it up, KIP-1082), kept when a fenced member
  joins again, so the broker sees one member coming back.
* `ShareSession`: one per broker that leads an assigned partition. Epoch 0 opens it with the
  partitions listed, each later request carries the next epoch, -1 closes it. A request whose
  answer is lost (or that the broker refuses for its epoch) leaves the session unknown: the next
  request opens a new one at 0.
* `Acknowledgements`: the records handed to the application and not acknowledged yet, and the
  acknowledgements waiting to be sent. A request at epoch 0 carries none (Kafka refuses them
  there), so they wait for the next request of the session.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from protocol.errors import ErrorCode
from protocol.messages.share_fetch import ACCEPT, GAP, REJECT, RELEASE

from .structs import TopicPartition

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
LEAVE_EPOCH = -1
TopicIdPartition = tuple[uuid.UUID, int]


class AcknowledgeType(enum.IntEnum):
    """Kafka's AcknowledgeType: what becomes of an acquired record."""

    GAP = GAP          # no record at that offset (sent by the client itself)
    ACCEPT = ACCEPT    # processed: never delivered again
    RELEASE = RELEASE  # give it back: delivered again, its delivery count one higher
    REJECT = REJECT    # unprocessable: never delivered again


# ---------------------------------------------------------------------------------------- membership
class HeartbeatOutcome(enum.Enum):
    OK = "ok"
    FIND_COORDINATOR = "find-coordinator"  # the coordinator moved or is not there: look it up, retry
    RETRY = "retry"                        # loading: the same coordinator, after a backoff
    REJOIN = "rejoin"                      # fenced or unknown: join again at epoch 0, owning nothing
    FATAL = "fatal"                        # the member cannot go on (authorization, group full, ...)


_FIND = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT})
_REJOIN = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH})


@dataclass(slots=True)
class ShareMembership:
    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    epoch: int = INITIAL_EPOCH
    subscription: tuple[str, ...] = ()
    assignment: frozenset[TopicIdPartition] = frozenset()
    heartbeat_interval_ms: int = 5000
    _sent_subscription: tuple[str, ...] | None = None  # what the coordinator has

    def subscribe(self, topics: Iterable[str]) -> None:
        self.subscription = tuple(sorted(set(topics)))

    def request_fields(self) -> tuple[int, list[str] | None]:
        """(member epoch, subscribed topic names) of the next heartbeat: the subscription goes on a
        join and whenever it changed since the coordinator last took it, else null (unchanged)."""
        if self.epoch == INITIAL_EPOCH or self.subscription != self._sent_subscription:
            return self.epoch, list(self.subscription)
        return self.epoch, None

    def on_response(self, error: int, member_epoch: int, interval_ms: int,
                    assignment: Iterable[TopicIdPartition] | None, sent_subscription: list[str] | None
                    ) -> HeartbeatOutcome:
        """Apply a heartbeat's answer; `sent_subscription` is what that heartbeat carried."""
        code = ErrorCode(error)
        if code == ErrorCode.NONE:
            self.epoch = member_epoch
            if interval_ms > 0:
                self.heartbeat_interval_ms = interval_ms
            if sent_subscription is not None:
                self._sent_subscription = tuple(sent_subscription)
            if assignment is not None:  # null: unchanged
                self.assignment = frozenset(assignment)
            return HeartbeatOutcome.OK
        if code in _FIND:
            return HeartbeatOutcome.FIND_COORDINATOR
        if code in _RETRY:
            return HeartbeatOutcome.RETRY
        if code in _REJOIN:
            self.fenced()
            return HeartbeatOutcome.REJOIN
        return HeartbeatOutcome.FATAL

    def fenced(self) -> None:
        """The coordinator does not know us at this epoch: start over, owning nothing."""
        self.epoch = INITIAL_EPOCH
        self.assignment = frozenset()
        self._sent_subscription = None


# ---------------------------------------------------------------------------------------- sessions
_SESSION_LOST = frozenset({ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                           ErrorCode.UNKNOWN_MEMBER_ID})


@dataclass(slots=True)
class ShareSession:
    """The share session with one broker: the epoch of the next request and the partitions the
    broker has in it."""

    epoch: int = INITIAL_EPOCH
    partitions: set[TopicIdPartition] = field(default_factory=set)

    @property
    def open(self) -> bool:
        return self.epoch > INITIAL_EPOCH

    def plan(self, wanted: Iterable[TopicIdPartition]) -> tuple[int, list[TopicIdPartition], list[TopicIdPartition]]:
        """(epoch, partitions to list, partitions to forget) of the next ShareFetch to this broker."""
        want = set(wanted)
        if not self.open:
            return INITIAL_EPOCH, sorted(want), []
        return self.epoch, sorted(want - self.partitions), sorted(self.partitions - want)

    def answered(self, error: int, listed: Iterable[TopicIdPartition] = (),
                 forgotten: Iterable[TopicIdPartition] = ()) -> bool:
        """The broker answered a request of this session; False when the session is gone."""
        if error in _SESSION_LOST:
            self.lost()
            return False
        if error:
            return True  # the request was refused for another reason; the session did not move
        if self.epoch == INITIAL_EPOCH:
            self.partitions = set()
        self.partitions |= set(listed)
        self.partitions -= set(forgotten)
        self.epoch = 1 if self.epoch == 0x7FFFFFFF else self.epoch + 1
        return True

    def lost(self) -> None:
        """No answer (the connection went), or the broker does not know the session: start over."""
        self.epoch = INITIAL_EPOCH
        self.partitions = set()


def session_error(error: int) -> bool:
    return error in _SESSION_LOST


# ---------------------------------------------------------------------------------------- acknowledgements
@dataclass(frozen=True, slots=True)
class AckBatch:
    """ShareFetch/ShareAcknowledge's AcknowledgementBatch: offsets first..last, one type for all
    of them or one per offset."""

    first: int
    last: int
    types: tuple[int, ...]


def batches_of(acks: Mapping[int, int]) -> list[AckBatch]:
    """Offset -> type as runs of consecutive offsets (one type when the run's types are all equal)."""
    out: list[AckBatch] = []
    run: list[tuple[int, int]] = []

    def flush() -> None:
        if run:
            types = tuple(t for _, t in run)
            out.append(AckBatch(run[0][0], run[-1][0], types[:1] if len(set(types)) == 1 else types))

    for offset in sorted(acks):
        if run and offset != run[-1][0] + 1:
            flush()
            run = []
        run.append((offset, acks[offset]))
    flush()
    return out


class Acknowledgements:
    """What the application was given and what it said about it, per partition."""

    def __init__(self) -> None:
        self.delivered: dict[TopicPartition, set[int]] = {}   # handed out, not acknowledged
        self.pending: dict[TopicPartition, dict[int, int]] = {}  # acknowledged, not sent

    def handed_out(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        self.delivered.setdefault(tp, set()).update(offsets)

    def gaps(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        """Offsets acquired without a record (compacted away): acknowledged as GAP at once."""
        for o in offsets:
            self.pending.setdefault(tp, {})[o] = AcknowledgeType.GAP

    def acknowledge(self, tp: TopicPartition, offset: int, kind: AcknowledgeType) -> bool:
        """False if the record was not handed out (or was acknowledged already)."""
        held = self.delivered.get(tp)
        if held is None or offset not in held:
            return False
        held.discard(offset)
        if not held:
            del self.delivered[tp]
        self.pending.setdefault(tp, {})[offset] = int(kind)
        return True

    def accept_delivered(self) -> None:
        """Implicit mode: everything handed out is ACCEPTed."""
        for tp, offsets in self.delivered.items():
            acks = self.pending.setdefault(tp, {})
            for o in offsets:
                acks[o] = AcknowledgeType.ACCEPT
        self.delivered = {}

    def take(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, list[AckBatch]]:
        """The pending acknowledgements of `tps`, as batches; they are no longer pending."""
        out: dict[TopicPartition, list[AckBatch]] = {}
        for tp in tps:
            acks = self.pending.pop(tp, None)
            if acks:
                out[tp] = batches_of(acks)
        return out

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Partitions no longer assigned: their records' locks are gone with the assignment."""
        for tp in tps:
            self.delivered.pop(tp, None)
            self.pending.pop(tp, None)


def acquired_offsets(ranges: Iterable[tuple[int, int, int]]) -> dict[int, int]:
    """AcquiredRecords (first, last, delivery count) -> offset -> delivery count."""
    return {o: count for first, last, count in ranges for o in range(first, last + 1)}


__all__ = ["ACCEPT", "REJECT", "RELEASE", "AckBatch", "AcknowledgeType", "Acknowledgements", "HeartbeatOutcome",
           "ShareMembership", "ShareSession", "acquired_offsets", "batches_of", "session_error"]
