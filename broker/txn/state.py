"""Transaction states and the metadata the coordinator keeps per transactional id.

The states are the seeds' (and Kafka's) state machine. Only the stable ones are ever written to
`__transaction_state`; PrepareEpochFence and Dead exist only as the *pending* state of a
transition in flight (fencing an Ongoing transaction, removing an expired id), so a coordinator
that reloads the log never finds them.

    Empty ─AddPartitions→ Ongoing ─EndTxn→ PrepareCommit ─markers→ CompleteCommit ─AddPartitions→ Ongoing
                              │                                                    ╲
                              └─EndTxn(abort) / timeout / new instance→ PrepareAbort ─markers→ CompleteAbort

A `TxnRecord` is the full value written for a transition (the log is compacted by key, so each
record must stand alone); `TxnMetadata` is the cached current state plus the transition in flight.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import IntEnum

from protocol.topic_partition import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 0x7FFF  # producer epochs are int16
# The timeout of a two-phase-commit transactional id (KIP-939): Kafka's Int.MaxValue, which it
# reads as "2PC" (TransactionMetadata.isDistributedTwoPhaseCommitTxn). Kept in the timeout so the
# mark survives in `__transaction_state` in the layout Kafka reads.
TWO_PC_TIMEOUT_MS = 2**31 - 1


def epoch_exhausted(epoch: int) -> bool:
    """Kafka rotates the producer id one step before the int16 limit: the last epoch is kept for
    fencing an Ongoing transaction, which needs one more bump."""
    return epoch >= MAX_EPOCH - 1


class TxnState(IntEnum):
    """Values are the byte written in `__transaction_state` (Kafka's numbering)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def wire_name(self) -> str:
        """The name Kafka's DescribeTransactions/ListTransactions use."""
        return _NAMES[self]

    @classmethod
    def from_wire_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in _NAMES.items()}

# Which stable state may follow which. A transition not listed here is a bug in machine.py.
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                 TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    # and, with transaction version 2, an abort of a transaction that added nothing
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                       TxnState.COMPLETE_ABORT}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
}



@dataclass(frozen=True, slots=True)
class TxnRecord:
    """One value of `__transaction_state`: everything needed to rebuild the id's metadata.

    `next_producer_id` is set only when an EndTxn v5 end rotates the producer id (epoch
    exhausted): the markers still go out under `producer_id`, and the completion switches over
    (to `next_producer_epoch`, or 0 when that is unset).

    In an Ongoing record, `next_producer_epoch` >= 0 says another instance took the transaction
    over (KIP-939's KeepPreparedTxn): `producer_id`/`producer_epoch` stay the transaction's own
    (its data carries them), `next_producer_id`/`next_producer_epoch` are the instance's, the
    only one that may end it. A `timeout_ms` of TWO_PC_TIMEOUT_MS marks a two-phase-commit id
    (Kafka's Int.MaxValue), whose transactions no timeout aborts.
    """

    producer_id: int
    producer_epoch: int
    last_producer_id: int
    last_producer_epoch: int
    next_producer_id: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    update_ms: int
    next_producer_epoch: int = NO_PRODUCER_EPOCH

    def replace(self, **changes: object) -> TxnRecord:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


@dataclass(slots=True)
class TxnMetadata:
    """The coordinator's cached view of one transactional id.

    `pending` is the state a written-but-not-yet-applied transition leads to; while it is set,
    other requests for the id answer CONCURRENT_TRANSACTIONS, as Kafka does.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    next_producer_id: int = NO_PRODUCER_ID
    next_producer_epoch: int = NO_PRODUCER_EPOCH
    pending: TxnState | None = None
    # When the Ongoing transaction times out, on this coordinator's monotonic clock (None until
    # the reaper first looks at it): never written, because `start_ms` is some broker's wall
    # clock, which a step or a failover to a broker whose clock differs moves by any amount.
    deadline_ms: int | None = None

    def record(self, **changes: object) -> TxnRecord:
        """The current state as a record, with `changes` applied (the next transition)."""
        base = TxnRecord(self.producer_id, self.producer_epoch, self.last_producer_id, self.last_producer_epoch,
                         self.next_producer_id, self.timeout_ms, self.state, frozenset(self.partitions),
                         self.start_ms, self.update_ms, self.next_producer_epoch)
        return base.replace(**changes) if changes else base

    @property
    def two_pc(self) -> bool:
        """Initialised with Enable2Pc: its transactions wait for their outcome, however long."""
        return self.timeout_ms == TWO_PC_TIMEOUT_MS

    @property
    def taken_over(self) -> bool:
        """An Ongoing transaction kept for a new instance (KeepPreparedTxn), which alone may end it."""
        return self.state == TxnState.ONGOING and self.next_producer_epoch >= 0

    @property
    def instance(self) -> tuple[int, int]:
        """The producer id and epoch of the instance the id belongs to now."""
        if self.taken_over:
            return self.next_producer_id, self.next_producer_epoch
        return self.producer_id, self.producer_epoch

    def apply(self, rec: TxnRecord) -> None:
        if rec.state != TxnState.ONGOING or self.state != TxnState.ONGOING or rec.start_ms != self.start_ms:
            self.deadline_ms = None  # another transaction (or none): its timeout is measured afresh
        self.producer_id = rec.producer_id
        self.producer_epoch = rec.producer_epoch
        self.last_producer_id = rec.last_producer_id
        self.last_producer_epoch = rec.last_producer_epoch
        self.next_producer_id = rec.next_producer_id
        self.next_producer_epoch = rec.next_producer_epoch
        self.timeout_ms = rec.timeout_ms
        self.state = rec.state
        self.partitions = set(rec.partitions)
        self.start_ms = rec.start_ms
        self.update_ms = rec.update_ms
        self.pending = None

    @classmethod
    def from_record(cls, transactional_id: str, rec: TxnRecord) -> TxnMetadata:
        m = cls(transactional_id, rec.producer_id, rec.producer_epoch, rec.timeout_ms)
        m.apply(rec)
        return m
