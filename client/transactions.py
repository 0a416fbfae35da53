"""The transactional producer's state machine, without any I/O.

States and transitions are those of Kafka's TransactionManager (the seeds describe them):

    UNINITIALIZED -> INITIALIZING -> READY -> IN_TRANSACTION -> COMMITTING_TRANSACTION -> READY
                                                    |                \\-> ABORTABLE_ERROR
                                                    \\-> ABORTING_TRANSACTION -> READY
    any -> FATAL_ERROR;  IN_TRANSACTION / COMMITTING / INITIALIZING -> ABORTABLE_ERROR -> ABORTING

Two-phase commit (KIP-939) adds PREPARED_TRANSACTION: entered from IN_TRANSACTION by `prepare()`
(everything sent and acknowledged, nothing more may join), or from INITIALIZING when an
InitProducerId with KeepPreparedTxn finds a transaction the broker kept for this instance; left
only by COMMITTING_TRANSACTION or ABORTING_TRANSACTION (an ordinary EndTxn).

The machine builds the requests (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn) and is told their answers; it returns a `Step` saying whether the
step is done, should be retried (after finding the coordinator again, or after a backoff), or has
failed. The producer's I/O code only carries requests and answers, so every transition and every
error mapping is testable without a broker.

Error mapping follows the Java client: coordinator moved or unavailable -> find it and retry;
load in progress / concurrent transactions -> back off and retry; fenced epoch, authorization of
the transactional id, invalid state or mapping -> fatal; a failed partition, topic or group
authorization, a failed produce -> abortable (the application aborts and tries again).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

from protocol.errors import ErrorCode
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from protocol.messages.end_txn import EndTxnRequest
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)

from .errors import (
    FatalError,
    IllegalStateError,
    KafkaClientError,
    ProducerFencedError,
    TransactionAbortableError,
    error_from_code,
)
from .structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition


class ProducerTxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"
    PREPARED_TRANSACTION = "PREPARED_TRANSACTION"


S = ProducerTxnState
# target -> the states it may be entered from (FATAL_ERROR: from anywhere)
_SOURCES: dict[ProducerTxnState, frozenset[ProducerTxnState]] = {
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.PREPARED_TRANSACTION: frozenset({S.IN_TRANSACTION, S.INITIALIZING}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.PREPARED_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.PREPARED_TRANSACTION}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR,
                                  S.INITIALIZING}),
    S.UNINITIALIZED: frozenset({S.READY, S.ABORTABLE_ERROR}),
}


class Outcome(enum.Enum):
    DONE = "done"
    RETRY = "retry"  # back off, send the same step again
    FIND_COORDINATOR = "find_coordinator"  # forget the coordinator, look it up, send again
    FAILED = "failed"  # `error` says what; the state has moved to ABORTABLE_ERROR or FATAL_ERROR


@dataclass(frozen=True, slots=True)
class Step:
    outcome: Outcome
    error: KafkaClientError | None = None


# The transaction timeout that marks a two-phase-commit transactional id (KIP-939), as Kafka's
# coordinator keeps it and DescribeTransactions reports it: Int.MaxValue, no timeout at all.
TWO_PC_TIMEOUT_MS = 2**31 - 1


@dataclass(frozen=True, slots=True)
class PreparedTransaction:
    """What names a prepared transaction to whoever completes it, in another process perhaps: the
    transactional id and the producer id and epoch its records carry (KIP-939's
    OngoingTxnProducerId/Epoch). Small, and JSON both ways, to travel in a commit message."""

    transactional_id: str
    producer_id: int
    epoch: int

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> PreparedTransaction:
        try:
            d = json.loads(text)
            return cls(str(d["transactional_id"]), int(d["producer_id"]), int(d["epoch"]))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"not a prepared-transaction token: {text!r}") from e


DONE = Step(Outcome.DONE)
RETRY = Step(Outcome.RETRY)
FIND_COORDINATOR = Step(Outcome.FIND_COORDINATOR)

E = ErrorCode
_COORDINATOR_MOVED = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE})
_BACK_OFF = frozenset({E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS})
_FENCED = frozenset({E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED})
_FATAL = frozenset({E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.INVALID_TXN_STATE, E.INVALID_PRODUCER_ID_MAPPING,
                    E.CLUSTER_AUTHORIZATION_FAILED, E.UNSUPPORTED_VERSION, E.UNSUPPORTED_FOR_MESSAGE_FORMAT})
# A failed batch ends the producer only for these (Java's TransactionManager); anything else, the
# leader's INVALID_TXN_STATE included, only makes the transaction abortable.
_PRODUCE_FATAL = frozenset({E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED,
                            E.UNSUPPORTED_VERSION, E.INVALID_PRODUCER_ID_MAPPING})


class TransactionManager:
    """State of one transactional producer: its id and epoch, the state, the partitions of the
    open transaction, and the error that ended it if any."""

    def __init__(self, transactional_id: str, transaction_timeout_ms: int = 60_000, *,
                 enable_2pc: bool = False) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.enable_2pc = enable_2pc  # InitProducerId with Enable2Pc: no timeout aborts our transactions
        self.keep_prepared = False  # the next InitProducerId keeps a prepared transaction (KeepPreparedTxn)
        self.prepared: PreparedTransaction | None = None  # the prepared transaction in hand, if any
        self.state = ProducerTxnState.UNINITIALIZED
        self.producer_id = -1
        self.producer_epoch = -1
        self.last_error: KafkaClientError | None = None
        self._new: set[TopicPartition] = set()  # seen in send(), not yet asked for
        self._pending: set[TopicPartition] = set()  # AddPartitionsToTxn in flight
        self._added: set[TopicPartition] = set()  # confirmed by the coordinator
        self.transaction_started = False  # something was added: the coordinator needs an EndTxn
        # A produce of this transaction failed, so the partition's sequence numbers no longer match
        # the broker's (the failed batch left a gap, or the broker lost the producer): once the
        # transaction is aborted, a new epoch must restart them at 0 (KIP-360, as Java does).
        self.epoch_bump_required = False

    # ------------------------------------------------------------------ transitions
    def _to(self, target: ProducerTxnState, error: KafkaClientError | None = None) -> None:
        if self.state is ProducerTxnState.FATAL_ERROR and target is not ProducerTxnState.FATAL_ERROR:
            raise self._fatal_error()
        if target is not ProducerTxnState.FATAL_ERROR and self.state not in _SOURCES[target]:
            raise IllegalStateError(f"invalid transaction state transition {self.state.name} -> {target.name}")
        if error is not None:
            self.last_error = error
        elif target not in (ProducerTxnState.ABORTABLE_ERROR, ProducerTxnState.FATAL_ERROR):
            self.last_error = None
        self.state = target

    def _fatal_error(self) -> KafkaClientError:
        err = self.last_error
        if isinstance(err, FatalError):
            return err
        fatal = FatalError(f"producer is in a fatal state: {err}")
        fatal.__cause__ = err
        return fatal

    def fatal(self, error: KafkaClientError) -> Step:
        if not isinstance(error, FatalError):
            wrapped = FatalError(str(error), error.code)
            wrapped.__cause__ = error
            error = wrapped
        self._to(ProducerTxnState.FATAL_ERROR, error)
        return Step(Outcome.FAILED, error)

    def abortable(self, error: KafkaClientError) -> Step:
        if self.state is ProducerTxnState.FATAL_ERROR:
            return Step(Outcome.FAILED, self.last_error)
        if self.state in (ProducerTxnState.ABORTING_TRANSACTION, ProducerTxnState.READY, ProducerTxnState.UNINITIALIZED):
            return self.fatal(error)  # nothing to abort back to: the producer cannot go on
        if not isinstance(error, TransactionAbortableError):
            wrapped = TransactionAbortableError(str(error), error.code)
            wrapped.__cause__ = error
            error = wrapped
        self._to(ProducerTxnState.ABORTABLE_ERROR, error)
        return Step(Outcome.FAILED, error)

    def raise_if_failed(self) -> None:
        """Raise the error that put us in ABORTABLE_ERROR / FATAL_ERROR, if we are there."""
        if self.state is ProducerTxnState.FATAL_ERROR:
            raise self._fatal_error()
        if self.state is ProducerTxnState.ABORTABLE_ERROR:
            assert self.last_error is not None
            raise self.last_error

    def _fail_code(self, code: int, what: str) -> Step:
        """Map a non-success, non-retry code of any transactional request."""
        ec = ErrorCode(code)
        if ec in _FENCED:
            return self.fatal(ProducerFencedError(
                f"{what}: transactional id {self.transactional_id!r} was initialised by a newer producer "
                f"(epoch > {self.producer_epoch}); this one is a zombie and must close", ec))
        if ec in _FATAL:
            return self.fatal(FatalError(f"{what} for {self.transactional_id!r}", ec))
        return self.fatal(FatalError(f"unexpected error in {what}", ec))

    # ------------------------------------------------------------------ InitProducerId
    def begin_init(self, *, keep_prepared: bool = False) -> InitProducerIdRequest:
        if self.state is ProducerTxnState.FATAL_ERROR:
            raise self._fatal_error()
        if self.state is not ProducerTxnState.INITIALIZING:
            self._to(ProducerTxnState.INITIALIZING)
        self.producer_id, self.producer_epoch = -1, -1
        self.keep_prepared = keep_prepared
        return self.init_request()

    def init_request(self) -> InitProducerIdRequest:
        return InitProducerIdRequest(transactional_id=self.transactional_id,
                                     transaction_timeout_ms=self.transaction_timeout_ms,
                                     enable_2pc=self.enable_2pc, keep_prepared_txn=self.keep_prepared)

    @property
    def needs_2pc_version(self) -> bool:
        """InitProducerId must go as v6 (KIP-939): an older version drops the two flags silently."""
        return self.enable_2pc or self.keep_prepared

    def bump_request(self) -> InitProducerIdRequest:
        """InitProducerId carrying our current id and epoch (v3+, KIP-360): the coordinator bumps the
        epoch of *this* producer instead of treating us as a new instance. Older versions drop the
        two fields, and the coordinator bumps the epoch anyway (it fences the previous instance,
        which is us)."""
        return InitProducerIdRequest(transactional_id=self.transactional_id,
                                     transaction_timeout_ms=self.transaction_timeout_ms,
                                     producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                                     enable_2pc=self.enable_2pc)

    def handle_init(self, code: int, producer_id: int, producer_epoch: int, *, ongoing_producer_id: int = -1,
                    ongoing_producer_epoch: int = -1) -> Step:
        if code == 0:
            self.producer_id, self.producer_epoch = producer_id, producer_epoch
            self.epoch_bump_required = False
            self.keep_prepared = False
            if ongoing_producer_id >= 0:
                # the broker kept a prepared transaction for us: it is ours to end, nothing else
                self.prepared = PreparedTransaction(self.transactional_id, ongoing_producer_id, ongoing_producer_epoch)
                self.transaction_started = True
                self._to(ProducerTxnState.PREPARED_TRANSACTION)
            else:
                self.prepared = None
                self._to(ProducerTxnState.READY)
            return DONE
        if code in _COORDINATOR_MOVED:
            return FIND_COORDINATOR
        if code in _BACK_OFF:
            return RETRY
        return self._fail_code(code, "InitProducerId")

    # ------------------------------------------------------------------ begin / partitions
    def begin(self) -> None:
        self.raise_if_failed()
        if self.state is not ProducerTxnState.READY:
            raise IllegalStateError(f"begin_transaction needs state READY, not {self.state.name}"
                                    + (" (call init_transactions first)" if self.state is ProducerTxnState.UNINITIALIZED
                                       else ""))
        self._to(ProducerTxnState.IN_TRANSACTION)

    def add_partition(self, tp: TopicPartition) -> None:
        """Called by send(): the partition must join the transaction before its batch goes out."""
        self.raise_if_failed()
        if self.state is not ProducerTxnState.IN_TRANSACTION:
            raise IllegalStateError(f"cannot send in state {self.state.name}: call begin_transaction first")
        if tp in self._added or tp in self._pending:
            return
        self._new.add(tp)

    def is_sendable(self, tp: TopicPartition) -> bool:
        """May a batch for `tp` be sent? Only once the coordinator knows the partition is in the txn."""
        return tp in self._added

    @property
    def has_partitions_to_add(self) -> bool:
        return bool(self._new)

    @property
    def has_pending_adds(self) -> bool:
        return bool(self._new or self._pending)

    def take_partitions_to_add(self) -> AddPartitionsToTxnRequest | None:
        """The next AddPartitionsToTxn (v3 layout); moves the new partitions to pending."""
        if not self._new or self.state is not ProducerTxnState.IN_TRANSACTION:
            return None
        self._pending |= self._new
        self._new.clear()
        return self.add_partitions_request()

    def add_partitions_request(self) -> AddPartitionsToTxnRequest:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(self._pending):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id, v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.producer_epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()])

    def handle_add_partitions(self, results: Mapping[TopicPartition, int], top_level: int = 0) -> Step:
        codes = {ErrorCode(c) for c in results.values() if c} | ({ErrorCode(top_level)} if top_level else set())
        codes.discard(E.OPERATION_NOT_ATTEMPTED)  # only said because another partition failed
        if not codes:
            self._added |= self._pending
            self._pending.clear()
            self.transaction_started = True
            return DONE
        if codes & _FENCED or codes & _FATAL:
            code = next(iter(codes & (_FENCED | _FATAL)))
            self._pending.clear()
            return self._fail_code(code, "AddPartitionsToTxn")
        if codes & _COORDINATOR_MOVED:
            return FIND_COORDINATOR
        if codes <= (_BACK_OFF | {E.UNKNOWN_TOPIC_OR_PARTITION, E.REQUEST_TIMED_OUT}):
            return RETRY
        self._pending.clear()
        bad = sorted(f"{tp.topic}-{tp.partition}: {ErrorCode(c).name}" for tp, c in results.items() if c)
        if codes <= {E.TOPIC_AUTHORIZATION_FAILED, E.UNKNOWN_PRODUCER_ID, E.TRANSACTION_ABORTABLE}:
            return self.abortable(TransactionAbortableError(
                f"could not add partitions to the transaction: {', '.join(bad)}", next(iter(codes))))
        return self.fatal(FatalError(f"unexpected error adding partitions: {', '.join(bad)}", next(iter(codes))))

    # ------------------------------------------------------------------ offsets
    def begin_add_offsets(self, group: ConsumerGroupMetadata) -> AddOffsetsToTxnRequest:
        self.raise_if_failed()
        if self.state is not ProducerTxnState.IN_TRANSACTION:
            raise IllegalStateError(f"send_offsets_to_transaction needs IN_TRANSACTION, not {self.state.name}")
        return AddOffsetsToTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                      producer_epoch=self.producer_epoch, group_id=group.group_id)

    def handle_add_offsets(self, code: int) -> Step:
        if code == 0:
            self.transaction_started = True
            return DONE
        if code in _COORDINATOR_MOVED:
            return FIND_COORDINATOR
        if code in _BACK_OFF:
            return RETRY
        if code in (E.GROUP_AUTHORIZATION_FAILED, E.TRANSACTION_ABORTABLE, E.UNKNOWN_PRODUCER_ID):
            return self.abortable(TransactionAbortableError("AddOffsetsToTxn failed", code))
        return self._fail_code(code, "AddOffsetsToTxn")

    def txn_offset_commit_request(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                                  group: ConsumerGroupMetadata) -> TxnOffsetCommitRequest:
        by_topic: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
        for tp, om in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(TxnOffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=om.offset, committed_leader_epoch=om.leader_epoch,
                committed_metadata=om.metadata))
        return TxnOffsetCommitRequest(
            transactional_id=self.transactional_id, group_id=group.group_id, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, generation_id=group.generation_id, member_id=group.member_id,
            group_instance_id=group.group_instance_id,
            topics=[TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()])

    def handle_txn_offset_commit(self, results: Mapping[TopicPartition, int]) -> Step:
        codes = {ErrorCode(c) for c in results.values() if c}
        if not codes:
            return DONE
        if codes & _FENCED:
            return self._fail_code(next(iter(codes & _FENCED)), "TxnOffsetCommit")
        if codes & (_COORDINATOR_MOVED | {E.REQUEST_TIMED_OUT}):
            return FIND_COORDINATOR
        if codes <= {E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS}:
            return RETRY
        abortable = {E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.FENCED_INSTANCE_ID, E.GROUP_AUTHORIZATION_FAILED,
                     E.TRANSACTION_ABORTABLE, E.REBALANCE_IN_PROGRESS}
        code = next(iter(codes))
        if codes <= abortable:
            return self.abortable(TransactionAbortableError(
                "offsets not committed: the consumer group moved on (rebalance) since these records were read",
                code))
        return self._fail_code(code, "TxnOffsetCommit")

    # ------------------------------------------------------------------ prepare (2PC)
    def prepare(self) -> PreparedTransaction:
        """Everything of the transaction is acknowledged (the producer flushed): it becomes
        PREPARED_TRANSACTION, and the token names it. Only a 2PC producer may: any other
        transaction is the coordinator's to abort when it times out."""
        self.raise_if_failed()
        if not self.enable_2pc:
            raise IllegalStateError("prepare_transaction needs a two-phase-commit producer (enable_2pc=True)")
        if self.state is not ProducerTxnState.IN_TRANSACTION:
            raise IllegalStateError(f"prepare_transaction needs IN_TRANSACTION, not {self.state.name}")
        if self.has_pending_adds:
            raise IllegalStateError("prepare_transaction: partitions are still being added to the transaction")
        self.prepared = PreparedTransaction(self.transactional_id, self.producer_id, self.producer_epoch)
        self._to(ProducerTxnState.PREPARED_TRANSACTION)
        return self.prepared

    # ------------------------------------------------------------------ commit / abort
    def begin_commit(self) -> bool:
        """Enter COMMITTING_TRANSACTION; True if an EndTxn must be sent (something was added)."""
        self.raise_if_failed()
        if self.state not in (ProducerTxnState.IN_TRANSACTION, ProducerTxnState.PREPARED_TRANSACTION):
            raise IllegalStateError(f"commit_transaction needs IN_TRANSACTION, not {self.state.name}")
        self._to(ProducerTxnState.COMMITTING_TRANSACTION)
        return self.transaction_started

    def begin_abort(self) -> bool:
        """Enter ABORTING_TRANSACTION; True if an EndTxn must be sent."""
        if self.state is ProducerTxnState.FATAL_ERROR:
            raise self._fatal_error()
        if self.state not in (ProducerTxnState.IN_TRANSACTION, ProducerTxnState.ABORTABLE_ERROR,
                              ProducerTxnState.ABORTING_TRANSACTION, ProducerTxnState.PREPARED_TRANSACTION):
            raise IllegalStateError(f"abort_transaction needs an open or failed transaction, not {self.state.name}")
        if self.state is not ProducerTxnState.ABORTING_TRANSACTION:
            self._to(ProducerTxnState.ABORTING_TRANSACTION)
        self._new.clear()
        return self.transaction_started

    def end_txn_request(self) -> EndTxnRequest:
        committed = self.state is ProducerTxnState.COMMITTING_TRANSACTION
        return EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                             producer_epoch=self.producer_epoch, committed=committed)

    def handle_end_txn(self, code: int, new_producer_id: int = -1, new_epoch: int = -1) -> Step:
        if code == 0:
            if new_producer_id >= 0 and new_epoch >= 0:  # EndTxn v5+: the coordinator bumped the epoch
                self.producer_id, self.producer_epoch = new_producer_id, new_epoch
                self.epoch_bump_required = False
            self.complete()
            return DONE
        if code in _COORDINATOR_MOVED:
            return FIND_COORDINATOR
        if code in _BACK_OFF:
            return RETRY
        if code in (E.UNKNOWN_PRODUCER_ID, E.TRANSACTION_ABORTABLE) and self.state is ProducerTxnState.COMMITTING_TRANSACTION:
            return self.abortable(TransactionAbortableError("EndTxn(commit) failed", code))
        return self._fail_code(code, "EndTxn")

    def complete(self) -> None:
        """The transaction is over (committed, aborted, or empty): back to READY, or to INITIALIZING
        when an aborted transaction left sequences to reset and the end did not bump the epoch
        (EndTxn before v5): the producer then sends `bump_request()`."""
        self._new.clear()
        self._pending.clear()
        self._added.clear()
        self.transaction_started = False
        self.prepared = None
        if self.state is ProducerTxnState.ABORTING_TRANSACTION and self.epoch_bump_required:
            self._to(ProducerTxnState.INITIALIZING)
            return
        self._to(ProducerTxnState.READY)

    # ------------------------------------------------------------------ produce results
    def on_produce_error(self, code: int, tp: TopicPartition) -> KafkaClientError:
        """A batch of this transaction failed for good: the transaction cannot commit.

        UNKNOWN_PRODUCER_ID and OUT_OF_ORDER_SEQUENCE_NUMBER land here too: an idempotent producer
        recovers from them by itself, but a transactional one cannot re-send a batch under a new
        epoch in the middle of a transaction, so they are abortable (Java does the same)."""
        ec = ErrorCode(code)
        err = error_from_code(code, f"produce to {tp.topic}-{tp.partition} failed")
        if ec in _FENCED:
            self._fail_code(code, "Produce")
            assert self.last_error is not None
            return self.last_error
        if ec in _PRODUCE_FATAL:
            self.fatal(err)
            assert self.last_error is not None
            return self.last_error
        self.epoch_bump_required = True  # the batch left a gap in the partition's sequences
        if self.state in (ProducerTxnState.IN_TRANSACTION, ProducerTxnState.COMMITTING_TRANSACTION, ProducerTxnState.ABORTABLE_ERROR):
            self.abortable(err)
        return err

    def on_produce_failure(self, error: KafkaClientError, *, sequenced: bool = True) -> None:
        """A batch failed without a code (timed out, client closed). If it had been sent
        (`sequenced`), nobody knows whether the broker wrote it, so its sequence is in doubt."""
        if sequenced and self.state is not ProducerTxnState.FATAL_ERROR:
            self.epoch_bump_required = True
        if self.state in (ProducerTxnState.IN_TRANSACTION, ProducerTxnState.COMMITTING_TRANSACTION):
            self.abortable(error)

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        return frozenset(self._added)

    def pending(self) -> Iterable[TopicPartition]:
        return iter(self._new | self._pending)
