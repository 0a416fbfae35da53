"""The transaction coordinator's decisions, without I/O (docs/architecture.md §3, docs/transactions.md).

Each request becomes a `Decision`: either an answer now (an error, or success with nothing to
write), or a `TxnRecord` that must be durable in `__transaction_state` *before* it takes effect.
For the latter the machine marks the id as having a transition in flight (`pending`); the shell
writes the record and then calls `complete()` (or `abandon()` if the write failed). `complete()`
returns the marker jobs the transition owes — a PrepareCommit/PrepareAbort hands its partitions
to the marker sender, whose `markers_written()` leads to the CompleteCommit/CompleteAbort record.

The rules follow Kafka's coordinator, including the parts that matter to real clients:
* InitProducerId bumps the epoch (fencing the previous instance); with an Ongoing transaction it
  first writes PrepareAbort under a bumped epoch and answers CONCURRENT_TRANSACTIONS, so the
  client retries and gets yet another epoch once the abort completed. An exhausted epoch rotates
  the producer id. Requests carrying the producer's current id and epoch (v3+, KIP-360) may
  recover the same producer instead of being fenced.
* EndTxn v5 (KIP-890 part 2) bumps the epoch at every transaction end and returns the new one, so
  a delayed EndTxn of an earlier transaction carries a stale epoch and is fenced.
* `verify()` answers the partition leader's question "is this partition in the producer's ongoing
  transaction?" (KIP-890 part 1: what AddPartitionsToTxn v4 verify_only asks over the wire).
* Two-phase commit (KIP-939): an id initialised with Enable2Pc (where the broker allows it) has
  Kafka's Int.MaxValue timeout, which the reaper never reaches: its transaction waits, however
  long, for whoever decides its outcome. An InitProducerId with KeepPreparedTxn finds such a
  transaction Ongoing and, instead of aborting it, keeps it and gives the new instance the next
  epoch, answering the transaction's own producer id and epoch beside it; from then on only that
  instance may end it (EndTxn), and under its epoch, so every earlier instance is fenced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from protocol.errors import ErrorCode
from storage.faults import broken

from ..partitioning import partition_for
from .state import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TWO_PC_TIMEOUT_MS,
    VALID_PREVIOUS,
    TopicPartition,
    TxnMetadata,
    TxnRecord,
    TxnState,
    epoch_exhausted,
)


@dataclass(frozen=True, slots=True)
class Decision:
    """What to answer, and what must be written first.

    With `record` (or `remove`) set, the answer (`error`, `producer_id`, `producer_epoch`) stands
    only once the write is durable; if the write fails the caller answers with the write's error.
    """

    error: ErrorCode = ErrorCode.NONE
    record: TxnRecord | None = None
    remove: bool = False  # write a tombstone: the id expired
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    # What a write was decided on: the id's transition it set in flight, under this coordinator
    # epoch. Written or applied only while both still hold (`TxnStateMachine.current`).
    transition: TxnState | None = None
    coordinator_epoch: int = -1
    # InitProducerId with KeepPreparedTxn: the transaction kept for the new instance (KIP-939's
    # OngoingTxnProducerId / OngoingTxnProducerEpoch); -1 when none was ongoing.
    ongoing_producer_id: int = NO_PRODUCER_ID
    ongoing_producer_epoch: int = NO_PRODUCER_EPOCH

    @property
    def writes(self) -> bool:
        return self.record is not None or self.remove


# The states an EndTxn v5 abort of a transaction that added no partition starts from.
_NOTHING_ADDED = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """Markers owed for one PrepareCommit/PrepareAbort: one per partition of the transaction."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]


def _fail(code: ErrorCode) -> Decision:
    return Decision(error=code)


class TxnStateMachine:
    """Every transactional id this coordinator owns, and the rules for changing them.

    `allocate_producer_id` hands out a fresh, cluster-unique producer id (a block allocator in the
    shell); it is the one side effect the machine triggers, and tests pass a counter.
    `allow_2pc` is the broker's transaction.two.phase.commit.enable: without it Enable2Pc is refused.
    """

    def __init__(self, *, num_partitions: int, max_timeout_ms: int, id_expiration_ms: int,
                 allocate_producer_id: Callable[[], int], allow_2pc: bool = False) -> None:
        self.num_partitions = num_partitions
        self.allow_2pc = allow_2pc
        self.max_timeout_ms = max_timeout_ms
        self.id_expiration_ms = id_expiration_ms
        self._allocate = allocate_producer_id
        self.txns: dict[str, TxnMetadata] = {}
        self.coordinator_epochs: dict[int, int] = {}  # __transaction_state partition -> its leader epoch

    # ---- reading -------------------------------------------------------------------------------
    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def coordinator_epoch(self, transactional_id: str) -> int:
        return self.coordinator_epochs.get(self.partition_of(transactional_id), 0)

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self.txns.get(transactional_id)

    def visible_state(self, meta: TxnMetadata) -> TxnState:
        """What DescribeTransactions shows: a fence in flight is PrepareEpochFence, as in Kafka."""
        if meta.pending in (TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD):
            return meta.pending
        return meta.state

    # ---- InitProducerId ------------------------------------------------------------------------
    def init_producer_id(self, tid: str, timeout_ms: int, expected_pid: int, expected_epoch: int,
                         now_ms: int, *, enable_2pc: bool = False, keep_prepared: bool = False) -> Decision:
        if not tid:
            return _fail(ErrorCode.INVALID_REQUEST)
        if enable_2pc:
            if not self.allow_2pc:
                # KIP-939's answer where 2PC is not allowed (the broker setting, or an ACL)
                return _fail(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            timeout_ms = TWO_PC_TIMEOUT_MS  # what was asked does not matter: no timeout at all
        elif timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return _fail(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        meta = self.txns.get(tid)
        if meta is None:
            meta = TxnMetadata(tid, self._allocate(), NO_PRODUCER_EPOCH, timeout_ms, update_ms=now_ms)
            self.txns[tid] = meta
        if meta.pending is not None:
            return _fail(ErrorCode.CONCURRENT_TRANSACTIONS)
        expected = expected_pid >= 0
        if expected and not self._may_recover(meta, expected_pid, expected_epoch):
            return _fail(ErrorCode.PRODUCER_FENCED)
        state = meta.state
        if state.is_prepare:
            return _fail(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state == TxnState.ONGOING:
            if keep_prepared:
                return self._take_over(meta, now_ms)
            return self._fence_and_abort(meta, now_ms, ErrorCode.CONCURRENT_TRANSACTIONS)
        if epoch_exhausted(meta.producer_epoch) and (not expected or expected_epoch == meta.producer_epoch):
            rec = meta.record(producer_id=self._allocate(), producer_epoch=0, last_producer_id=meta.producer_id,
                              last_producer_epoch=meta.producer_epoch if expected else NO_PRODUCER_EPOCH,
                              next_producer_id=NO_PRODUCER_ID)
        else:
            bumped = meta.producer_epoch + 1
            if not expected:
                epoch, last = bumped, NO_PRODUCER_EPOCH
            elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == meta.producer_epoch:
                epoch, last = bumped, meta.producer_epoch
            elif expected_epoch == meta.last_producer_epoch:
                epoch, last = meta.producer_epoch, meta.last_producer_epoch  # a retry of a bump it missed
            else:
                return _fail(ErrorCode.PRODUCER_FENCED)
            rec = meta.record(producer_epoch=epoch, last_producer_epoch=last)
        rec = rec.replace(timeout_ms=timeout_ms, state=TxnState.EMPTY, partitions=frozenset(), start_ms=-1,
                          update_ms=now_ms)
        return self._begin(meta, rec, producer_id=rec.producer_id, producer_epoch=rec.producer_epoch)

    @staticmethod
    def _may_recover(meta: TxnMetadata, pid: int, epoch: int) -> bool:
        """KIP-360: a producer naming its own id may continue (Kafka's isValidProducerId)."""
        return (meta.producer_epoch == NO_PRODUCER_EPOCH or pid == meta.producer_id
                or (pid == meta.last_producer_id and epoch_exhausted(epoch)))

    def _take_over(self, meta: TxnMetadata, now_ms: int) -> Decision:
        """KeepPreparedTxn on an Ongoing two-phase-commit transaction: keep it, and give the new
        instance the epoch after the last one handed out (fencing every earlier instance), or a
        producer id of its own when that would leave no epoch for the end's markers. Nothing is
        aborted; the answer names the transaction's producer id and epoch as well.

        A transaction that is not 2PC is refused: its outcome belongs to its timeout, and an
        instance committing it would race the reaper."""
        if not meta.two_pc:
            return _fail(ErrorCode.INVALID_TXN_STATE)
        pid, epoch = meta.instance
        if epoch_exhausted(epoch + 1):
            pid, epoch = self._allocate(), 0
        else:
            epoch += 1
        rec = meta.record(next_producer_id=pid, next_producer_epoch=epoch, update_ms=now_ms)
        return self._begin(meta, rec, producer_id=pid, producer_epoch=epoch,
                           ongoing=(meta.producer_id, meta.producer_epoch))

    def _fence_and_abort(self, meta: TxnMetadata, now_ms: int, error: ErrorCode) -> Decision:
        """Abort an Ongoing transaction under a bumped epoch, so its producer is fenced at the
        partition leaders by the markers themselves. Two steps, as Kafka's transaction version 2
        takes them (the fence, then the abort's own bump): one step would make the fenced
        producer's EndTxn look like a retry of the abort (`_is_v5_retry`). A transaction taken
        over by another instance is aborted above that instance's epoch too."""
        top = meta.producer_epoch
        if meta.taken_over and meta.next_producer_id == meta.producer_id:
            top = max(top, meta.next_producer_epoch)
        rec = meta.record(producer_epoch=min(top + 2, MAX_EPOCH), last_producer_epoch=NO_PRODUCER_EPOCH,
                          next_producer_id=NO_PRODUCER_ID, next_producer_epoch=NO_PRODUCER_EPOCH,
                          state=TxnState.PREPARE_ABORT, update_ms=now_ms)
        return self._begin(meta, rec, error=error, pending=TxnState.PREPARE_EPOCH_FENCE)

    # ---- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------
    def _check_producer(self, meta: TxnMetadata | None, pid: int, epoch: int) -> ErrorCode:
        if meta is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if meta.taken_over:
            # The instance that kept the transaction may only end it (KIP-939); the instance that
            # wrote it, or any other before, is fenced.
            if (pid, epoch) == meta.instance:
                return ErrorCode.INVALID_TXN_STATE
            return (ErrorCode.PRODUCER_FENCED if pid in (meta.instance[0], meta.producer_id)
                    else ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if meta.next_producer_id >= 0 and pid == meta.next_producer_id:
            return ErrorCode.CONCURRENT_TRANSACTIONS  # EndTxn v5 rotated the id; completion pending
        if pid != meta.producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if epoch != meta.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if meta.pending is not None or meta.state.is_prepare:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.NONE

    def add_partitions(self, tid: str, pid: int, epoch: int, partitions: Iterable[TopicPartition],
                       now_ms: int) -> Decision:
        meta = self.txns.get(tid)
        err = self._check_producer(meta, pid, epoch)
        if err:
            return _fail(err)
        assert meta is not None
        new = frozenset(partitions)
        if meta.state == TxnState.ONGOING:
            if new <= meta.partitions:
                return Decision()  # nothing new: answer at once, as Kafka does
            rec = meta.record(partitions=frozenset(meta.partitions | new), update_ms=now_ms)
        elif meta.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            rec = meta.record(state=TxnState.ONGOING, partitions=new, start_ms=now_ms, update_ms=now_ms)
        else:
            return _fail(ErrorCode.INVALID_TXN_STATE)
        return self._begin(meta, rec)

    def verify(self, tid: str, pid: int, epoch: int, partitions: Iterable[TopicPartition]) -> ErrorCode:
        """Is every partition part of the producer's ongoing transaction? Writes nothing. No is
        TRANSACTION_ABORTABLE, as Kafka's coordinator answers: the transaction cannot go on, the
        producer can (the partition leader tells older clients INVALID_TXN_STATE, wire_errors)."""
        meta = self.txns.get(tid)
        err = self._check_producer(meta, pid, epoch)
        if err:
            return err
        assert meta is not None
        if meta.state != TxnState.ONGOING or not set(partitions) <= meta.partitions:
            return ErrorCode.TRANSACTION_ABORTABLE
        return ErrorCode.NONE

    # ---- EndTxn --------------------------------------------------------------------------------
    def end_txn(self, tid: str, pid: int, epoch: int, commit: bool, now_ms: int, *,
                bump_epoch: bool = False) -> Decision:
        """bump_epoch: EndTxn v5 semantics (a new epoch per transaction, returned to the client)."""
        meta = self.txns.get(tid)
        if meta is None:
            return _fail(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        wanted = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        in_prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if bump_epoch and meta.pending != TxnState.PREPARE_EPOCH_FENCE and self._is_v5_retry(meta, pid, epoch):
            # As Kafka's handleEndTransaction for transaction version 2: only an end in prepare
            # or complete can have been bumped by this request; the other outcome is refused.
            if not (meta.state.is_prepare or meta.state.is_complete):
                return _fail(ErrorCode.PRODUCER_FENCED)
            if meta.pending is not None or meta.state == in_prepare:
                return _fail(ErrorCode.CONCURRENT_TRANSACTIONS)
            if meta.state == wanted:
                return Decision(producer_id=meta.producer_id, producer_epoch=meta.producer_epoch)
            return _fail(ErrorCode.INVALID_TXN_STATE)
        if meta.taken_over:
            return self._end_taken_over(meta, pid, epoch, commit, now_ms, bump_epoch)
        if pid != meta.producer_id:
            return _fail(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if epoch != meta.producer_epoch:
            return _fail(ErrorCode.PRODUCER_FENCED)
        if meta.pending is not None:
            return _fail(ErrorCode.CONCURRENT_TRANSACTIONS)
        state = meta.state
        # Transaction version 2 aborts a transaction that added nothing (its client cannot know
        # whether a refused produce reached us): under the next epoch, nothing to mark, as
        # Kafka's prepareAbortOrCommit with noPartitionAdded (simulation seed 4694).
        empty_abort = bump_epoch and not commit and state in _NOTHING_ADDED
        if state == TxnState.ONGOING or empty_abort:
            prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            if not bump_epoch:
                rec = meta.record(state=prepare, update_ms=now_ms)
                return self._begin(meta, rec, producer_id=meta.producer_id, producer_epoch=meta.producer_epoch)
            # The markers carry the bumped epoch; with the epoch exhausted the id rotates at completion.
            rec = meta.record(state=prepare, producer_epoch=meta.producer_epoch + 1,
                              last_producer_epoch=meta.producer_epoch, update_ms=now_ms)
            if empty_abort:
                rec = rec.replace(partitions=frozenset(), start_ms=now_ms)
            if epoch_exhausted(rec.producer_epoch):
                rec = rec.replace(next_producer_id=self._allocate())
                return self._begin(meta, rec, producer_id=rec.next_producer_id, producer_epoch=0)
            return self._begin(meta, rec, producer_id=rec.producer_id, producer_epoch=rec.producer_epoch)
        if state == wanted and not bump_epoch:
            return Decision(producer_id=meta.producer_id, producer_epoch=meta.producer_epoch)  # a retry
        if state == in_prepare:
            return _fail(ErrorCode.CONCURRENT_TRANSACTIONS)
        return _fail(ErrorCode.INVALID_TXN_STATE)

    def _end_taken_over(self, meta: TxnMetadata, pid: int, epoch: int, commit: bool, now_ms: int,
                        bump_epoch: bool) -> Decision:
        """EndTxn of a transaction kept for a new instance: only that instance's id and epoch end
        it. The markers go out under the transaction's producer id (its data carries it) with an
        epoch above the instance's and the transaction's own, so every earlier instance is fenced
        at the partitions too: the instance's epoch, or the next one with EndTxn v5, which is
        returned to it. An instance that got a producer id of its own (the epochs had run out)
        moves to it at completion, and the markers take the last epoch."""
        ipid, iepoch = meta.instance
        if pid not in (ipid, meta.producer_id):
            return _fail(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if (pid, epoch) != (ipid, iepoch):
            return _fail(ErrorCode.PRODUCER_FENCED)
        if meta.pending is not None:
            return _fail(ErrorCode.CONCURRENT_TRANSACTIONS)
        prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        nxt = iepoch + 1 if bump_epoch else iepoch
        if ipid != meta.producer_id:
            rec = meta.record(state=prepare, producer_epoch=MAX_EPOCH, last_producer_epoch=NO_PRODUCER_EPOCH,
                              next_producer_id=ipid, next_producer_epoch=nxt, update_ms=now_ms)
            return self._begin(meta, rec, producer_id=ipid, producer_epoch=nxt)
        rec = meta.record(state=prepare, producer_epoch=nxt, next_producer_id=NO_PRODUCER_ID,
                          next_producer_epoch=NO_PRODUCER_EPOCH, update_ms=now_ms,
                          last_producer_epoch=iepoch if bump_epoch else meta.last_producer_epoch)
        if bump_epoch and epoch_exhausted(nxt):
            rec = rec.replace(next_producer_id=self._allocate())
            return self._begin(meta, rec, producer_id=rec.next_producer_id, producer_epoch=0)
        return self._begin(meta, rec, producer_id=ipid, producer_epoch=nxt)

    @staticmethod
    def _is_v5_retry(meta: TxnMetadata, pid: int, epoch: int) -> bool:
        """An EndTxn v5 sent again with the epoch it had before the end bumped it — told from
        what `__transaction_state` keeps, as Kafka does (its retryOnEpochBump / retryOnOverflow),
        so that a coordinator that loaded the log after a failover answers the retry as the one
        that took the request would have: the id's epoch is one past the request's, or the end
        rotated an exhausted id (the previous producer id is the request's, the new one at 0)."""
        if pid == meta.producer_id and meta.producer_epoch == epoch + 1:
            return True
        if pid == meta.next_producer_id and meta.next_producer_epoch == epoch + 1:
            return True  # the end of an instance with an id of its own (`_end_taken_over`), completing
        return pid == meta.last_producer_id and meta.producer_epoch == 0 and epoch_exhausted(epoch + 1)

    # ---- the marker sender's report ------------------------------------------------------------
    def markers_written(self, job: MarkerJob, now_ms: int) -> Decision | None:
        """Every partition has its marker: write CompleteCommit/CompleteAbort. None if the
        transaction moved on meanwhile (nothing to complete)."""
        meta = self.txns.get(job.transactional_id)
        prepare = TxnState.PREPARE_COMMIT if job.commit else TxnState.PREPARE_ABORT
        if (meta is None or meta.state != prepare or meta.pending is not None
                or meta.producer_id != job.producer_id or meta.producer_epoch != job.producer_epoch
                or job.coordinator_epoch != self.coordinator_epoch(job.transactional_id)):
            return None  # (a job of an earlier load of this partition: the reload sent its own)
        complete = TxnState.COMPLETE_COMMIT if job.commit else TxnState.COMPLETE_ABORT
        rec = meta.record(state=complete, partitions=frozenset(), update_ms=now_ms)
        if meta.next_producer_id >= 0:
            rec = rec.replace(producer_id=meta.next_producer_id, producer_epoch=max(meta.next_producer_epoch, 0),
                              last_producer_id=meta.producer_id, last_producer_epoch=meta.producer_epoch,
                              next_producer_id=NO_PRODUCER_ID, next_producer_epoch=NO_PRODUCER_EPOCH)
        return self._begin(meta, rec)

    # ---- timers --------------------------------------------------------------------------------
    def _idle(self, served: Callable[[str], bool]) -> Iterator[tuple[str, TxnMetadata]]:
        """The served ids with no transition in flight, each looked up as it is reached: a pass
        of the timers writes one decision after another, and an id whose partition was reloaded
        meanwhile must be decided on what the reload says, not on what it was."""
        for tid in list(self.txns):
            meta = self.txns.get(tid)
            if meta is not None and meta.pending is None and served(tid):
                yield tid, meta

    def timed_out(self, now_ms: int, mono_ms: int,
                  served: Callable[[str], bool] = lambda _: True) -> Iterator[tuple[str, Decision]]:
        """Abort (fencing the producer) every Ongoing transaction older than its timeout, among
        the ids `served` (not those of a partition still loading). Lazy: each decision is made
        when the caller asks for the next one.

        Age is measured on this coordinator's monotonic clock (`mono_ms`), not by comparing the
        wall clock (`now_ms`) with the recorded start time as Kafka does: that start time is the
        wall clock of whichever broker began the transaction, before any step of it, and a
        coordinator whose clock is behind it by an hour (stepped back, or a failover to a broker
        whose clock differs) left the transaction open for that hour, its data holding back the
        last stable offset of every partition it wrote to (simulation seed 18). The wall clock
        only says how much of the timeout was already used when this coordinator first looks,
        bounded by the timeout: so an Ongoing transaction is aborted at most its timeout plus one
        reaper pass after its coordinator began or loaded it, whatever any wall clock does.

        A two-phase-commit transaction has no timeout (KIP-939): it waits for its outcome."""
        for tid, meta in self._idle(served):
            if meta.state == TxnState.ONGOING and not meta.two_pc and self._deadline(meta, now_ms, mono_ms) < mono_ms:
                yield tid, self._fence_and_abort(meta, now_ms, ErrorCode.NONE)

    @staticmethod
    def _deadline(meta: TxnMetadata, now_ms: int, mono_ms: int) -> int:
        if meta.deadline_ms is None:
            left = meta.start_ms + meta.timeout_ms - now_ms  # -1 at most: past it on the wall clock too
            meta.deadline_ms = mono_ms + min(max(left, -1), meta.timeout_ms)
        return meta.deadline_ms

    def expired(self, now_ms: int, served: Callable[[str], bool] = lambda _: True) -> Iterator[tuple[str, Decision]]:
        """Tombstones for ids idle past transactional.id.expiration.ms with no transaction open
        (lazy, as timed_out)."""
        for tid, meta in self._idle(served):
            if meta.state in VALID_PREVIOUS[TxnState.DEAD] and meta.update_ms + self.id_expiration_ms < now_ms:
                meta.pending = TxnState.DEAD
                yield tid, Decision(remove=True, transition=TxnState.DEAD, coordinator_epoch=self.coordinator_epoch(tid))

    # ---- applying written transitions ----------------------------------------------------------
    def _begin(self, meta: TxnMetadata, rec: TxnRecord, *, error: ErrorCode = ErrorCode.NONE,
               producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
               pending: TxnState | None = None,
               ongoing: tuple[int, int] = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)) -> Decision:
        if meta.state not in VALID_PREVIOUS[rec.state]:
            raise AssertionError(f"{meta.transactional_id}: illegal transition {meta.state.name} -> {rec.state.name}")
        meta.pending = pending or rec.state
        return Decision(error=error, record=rec, producer_id=producer_id, producer_epoch=producer_epoch,
                        transition=meta.pending, coordinator_epoch=self.coordinator_epoch(meta.transactional_id),
                        ongoing_producer_id=ongoing[0], ongoing_producer_epoch=ongoing[1])

    def current(self, tid: str, decision: Decision) -> bool:
        """Does `decision` still stand: is its transition the one the id has in flight, under the
        coordinator epoch it was decided in? Not after the partition was unloaded (and perhaps
        loaded again) meanwhile: a PrepareAbort meant for the previous transaction, or the
        tombstone of an id that is active again, must be neither written nor applied."""
        meta = self.txns.get(tid)
        if broken("reaper-recheck"):  # issue 23 item 9 taken back: any decision applies
            return meta is not None
        return (meta is not None and decision.transition is not None and meta.pending is decision.transition
                and decision.coordinator_epoch == self.coordinator_epoch(tid))

    def complete(self, tid: str, decision: Decision) -> list[MarkerJob]:
        """The decision's write is durable: apply it (if it still stands); returns the markers
        it owes."""
        if not self.current(tid, decision):
            return []
        meta = self.txns[tid]
        if decision.remove:
            del self.txns[tid]
            return []
        rec = decision.record
        assert rec is not None
        meta.apply(rec)
        if rec.state.is_prepare:
            return [MarkerJob(tid, rec.producer_id, rec.producer_epoch, rec.state == TxnState.PREPARE_COMMIT,
                              self.coordinator_epoch(tid), rec.partitions)]
        return []

    def abandon(self, tid: str, decision: Decision) -> None:
        """The write failed: forget the transition (and an id that was never written at all) —
        if it is still the one in flight, not one a reload started since."""
        if not self.current(tid, decision):
            return
        meta = self.txns[tid]
        meta.pending = None
        if meta.producer_epoch == NO_PRODUCER_EPOCH and meta.state == TxnState.EMPTY:
            del self.txns[tid]

    # ---- recovery ------------------------------------------------------------------------------
    def load(self, tid: str, rec: TxnRecord | None) -> None:
        """Replay one record of `__transaction_state` (later records win; None is a tombstone)."""
        if rec is None:
            self.txns.pop(tid, None)
            return
        meta = self.txns.get(tid)
        if meta is None:
            self.txns[tid] = TxnMetadata.from_record(tid, rec)
        else:
            meta.apply(rec)

    def unload_partition(self, partition: int) -> None:
        """Forget the ids of a `__transaction_state` partition (before reloading it)."""
        for tid in [t for t in self.txns if self.partition_of(t) == partition]:
            del self.txns[tid]

    def recovered_jobs(self) -> list[MarkerJob]:
        """Transactions found in PrepareCommit/PrepareAbort: their markers must be sent again."""
        return [MarkerJob(tid, m.producer_id, m.producer_epoch, m.state == TxnState.PREPARE_COMMIT,
                          self.coordinator_epoch(tid), frozenset(m.partitions))
                for tid, m in self.txns.items() if m.state.is_prepare and m.pending is None]
