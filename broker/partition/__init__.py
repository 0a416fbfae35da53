"""One local replica of a partition: the only way into its log and its replica state.

Handlers, coordinators, housekeeping and the replica fetcher reach a partition's data only
through these operations — `append` with the origin of the records, `read` with an isolation
level and the caller's idea of the leader epoch, offset lookups, record deletion, `maintain` and
`compact` — so that the rules every caller must follow (who may append what, epoch fencing, the
high watermark and LSO as read bounds, waking parked requests when any of them moves) are written
once, here, and replication changes them in one place. The log and the replica state are private
to this package (tests/unit/test_partition_sealed.py); only `move.py`, which swaps the log for its
copy in another log directory, works on the log beside this class.

Leadership is state this object is *given* (become_leader / become_follower, from the metadata
the broker applies); it never assumes it. What depends on followers — the high watermark, the
ISR, acks=all — is decided by ReplicaState (sans-IO, replica_state.py beside this); this class
carries the decisions out on the log and wakes the requests waiting on them.
"""

from __future__ import annotations

import asyncio
import enum
import functools
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple, NoReturn

import structlog

from protocol.batch import HEADER_SIZE, BatchHeader, read_header
from protocol.clock import Clock
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.fetch import AbortedTransaction
from protocol.records import decode_batch
from protocol.topic_partition import TopicPartition
from storage import cleaner
from storage.config import LogConfig
from storage.faults import broken
from storage.fs import OS_FS, FileSystem
from storage.leader_epoch import end_offset_for
from storage.log import AppendResult, PartitionLog
from storage.offload import INLINE, Offload
from storage.producer_state import ProducerEntry
from storage.segment import unlink_all

from ..batch_validation import validate_client_batches
from ..group_commit import GroupCommit
from .replica_state import Assignment, IsrChange, ReplicaState, Role

logger = structlog.get_logger(__name__)

HIGH_WATERMARK = -1  # DeleteRecords' offset for "everything committed so far"
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


class AppendOrigin(enum.Enum):
    """Where records come from decides what is checked (Kafka's AppendOrigin)."""

    CLIENT = "client"  # a producer: full validation, offsets assigned, no control batches
    COORDINATOR = "coordinator"  # the broker's own group/transaction records and markers
    REPLICATION = "replication"  # a follower copying its leader: offsets and epochs kept


class Isolation(enum.IntEnum):
    """How far a read may go (Kafka's FetchIsolation)."""

    READ_UNCOMMITTED = 0  # up to the high watermark
    READ_COMMITTED = 1  # up to the last stable offset
    LOG_END = 2  # a follower replica: up to the log end


class VerificationGuard:
    """Ties a KIP-890 verdict to the append it allows (Kafka's VerificationGuard).

    Between the coordinator's "this partition is in the producer's transaction" and the append,
    the transaction may end and its marker land here; the batch would then open a transaction
    nobody will ever close. A marker for the producer discards its guard, so that late append finds
    the guard gone and is refused.

    It also keeps the lowest sequence (of the newest epoch) among the batches checked under it
    (Kafka's VerificationStateEntry): a batch whose check failed retriably comes back, and a later
    batch of the producer must not open the transaction before it, or the retry would be refused
    OUT_OF_ORDER_SEQUENCE_NUMBER (an unknown producer may start at any sequence).
    """

    __slots__ = ("epoch", "lowest_sequence")

    def __init__(self) -> None:
        self.epoch = -1
        self.lowest_sequence: int | None = None

    def saw(self, epoch: int, sequence: int) -> None:
        if epoch > self.epoch or self.lowest_sequence is None:
            self.epoch, self.lowest_sequence = epoch, sequence
        elif epoch == self.epoch:
            self.lowest_sequence = min(self.lowest_sequence, sequence)


class PartitionRead(NamedTuple):
    error: ErrorCode
    records: bytes | memoryview
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    aborted: list[AbortedTransaction] | None  # only at READ_COMMITTED
    next_offset: int  # the offset after the last batch returned; the requested offset if none


class Partition:
    __slots__ = ("topic", "index", "tp", "_log", "_state", "_waiters", "_clock", "_group_commit", "_verifying",
                 "flush_wait", "_roll_flush", "on_storage_error", "offline")

    def __init__(self, topic: str, index: int, log: PartitionLog, local_id: int,
                 clock: Clock, group_commit: GroupCommit | None = None,
                 replica_lag_time_max_ms: int = 30_000) -> None:
        self.topic = topic
        self.index = index
        self.tp = TopicPartition(topic, index)  # the key every table of partitions uses
        self._log = log
        self._state = ReplicaState(local_id, replica_lag_time_max_ms, min_isr=log.config.min_insync_replicas)
        self._waiters: list[Parked] = []
        # Wall time goes into the log (timestamps, time-based rolls); the replicas' lag, the ISR
        # and every wait are measured on the monotonic clock, which a wall-clock step cannot move.
        self._clock = clock
        self._group_commit = group_commit or GroupCommit()
        self._verifying: dict[int, VerificationGuard] = {}  # producer id -> guard of its open check
        # The flush the log's flush policy asked for after the last append (None: it asked for
        # none). It runs on group commit's I/O thread; a produce answer waits for it.
        self.flush_wait: asyncio.Future[None] | None = None
        self._roll_flush: asyncio.Future[None] | None = None  # the flush after a roll, while it runs
        # Told of an I/O error of the log's disk (the topic table takes the log directory offline).
        self.on_storage_error: Callable[[Partition, OSError], None] | None = None
        self.offline = False  # the log directory failed: closed, answering KAFKA_STORAGE_ERROR

    @classmethod
    def open(cls, log_dir: Path, topic: str, index: int, config: LogConfig, local_id: int,
             clock: Clock, group_commit: GroupCommit | None = None,
             replica_lag_time_max_ms: int = 30_000, *, fs: FileSystem = OS_FS,
             offload: Offload = INLINE) -> Partition:
        plog = PartitionLog.open(log_dir / f"{topic}-{index}", config, now_ms=clock.now_ms, fs=fs, offload=offload)
        return cls(topic, index, plog, local_id, clock, group_commit, replica_lag_time_max_ms)

    # ---- leadership (given) -----------------------------------------------------------------
    def become_leader(self, a: Assignment) -> None:
        """Lead under `a`, at the controller's epoch: followers fetch with that epoch, and a
        leader above it would fence them all.

        The controller only ever raises a partition's epoch, and a broker writes under an epoch
        only once the controller gave it, so records of a later epoch than the one assigned are
        a history this partition never had (a restored or foreign directory). They are cut off,
        as a follower's would be (`diverging`): kept, they would carry an epoch the history
        behind them contradicts, and the leader's appends would not enter its epoch history."""
        later = [start for epoch, start in self._log.leader_epochs if epoch > a.leader_epoch]
        if later:
            logger.warning("log holds records of a later leader epoch than the controller assigned: truncating",
                           topic=self.topic, partition=self.index, leader_epoch=a.leader_epoch,
                           log_epochs=self._log.leader_epochs, to=later[0], was=self._log.log_end_offset)
            self._log.truncate_to(later[0])
            self._state.on_truncate(later[0])
        self._state.become_leader(a, self._log.log_end_offset, self._log.high_watermark, self._clock.monotonic_ms())
        # A sole replica's whole log is committed at once (nobody else must catch up first).
        self._state.maybe_advance_high_watermark(self._log.log_end_offset, self._clock.monotonic_ms())
        self._advance_high_watermark()
        self.notify()

    def become_follower(self, a: Assignment) -> bool:
        self._verifying.clear()  # whatever was being checked will be refused as NOT_LEADER anyway
        changed = self._state.become_follower(a)
        self.notify()  # parked client fetches must now answer NOT_LEADER_OR_FOLLOWER
        return changed

    @property
    def is_leader(self) -> bool:
        return self._state.role == Role.LEADER

    @property
    def leader_epoch(self) -> int:
        return self._state.leader_epoch

    @property
    def leader(self) -> int:
        return self._state.leader

    @property
    def leader_epoch_start_offset(self) -> int:
        """The log end when this leader epoch began: a leader's reads of what its predecessors
        committed are complete only once its high watermark has reached it."""
        return self._state.leader_epoch_start_offset

    @property
    def role(self) -> Role:
        return self._state.role

    @property
    def assignment(self) -> Assignment | None:
        """The replicas, ISR, leader and epochs as the controller last committed them here."""
        return self._state.assignment

    @property
    def latest_epoch(self) -> int:
        """The leader epoch of the last batch in the log (a follower's last fetched epoch)."""
        return self._log.latest_epoch

    @property
    def closed(self) -> bool:
        """The log is closed: the replica was deleted, moved away, or its directory failed."""
        return self._log.closed

    @property
    def directory(self) -> Path:
        """The log's directory (`topic-N`) in the log directory that holds it."""
        return self._log.directory

    @property
    def config(self) -> LogConfig:
        return self._log.config

    def holds(self, plog: PartitionLog) -> bool:
        """Whether `plog` is this replica's log (not a replaced one, nor a move's copy)."""
        return self._log is plog

    # ---- offsets ----------------------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return self._log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self._log.last_stable_offset

    @property
    def log_start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log.log_end_offset

    def _advance_high_watermark(self) -> None:
        hw = self._state.high_watermark
        if hw > self._log.high_watermark:
            self._log.high_watermark = min(hw, self._log.log_end_offset)

    # ---- writes -----------------------------------------------------------------------------
    def start_verification(self, producer_id: int, epoch: int = -1, sequence: int = -1) -> VerificationGuard:
        """The guard a transactional batch of `producer_id` must still hold when it is appended;
        checks running at once for one producer share it. A batch's `epoch` and first `sequence`
        (none for an offset commit) count towards the guard's lowest sequence."""
        guard = self._verifying.get(producer_id)
        if guard is None:
            guard = self._verifying[producer_id] = VerificationGuard()
        if sequence >= 0:
            guard.saw(epoch, sequence)
        return guard

    def needs_verification(self, h: BatchHeader) -> bool:
        """KIP-890 part 1: a transactional batch that would open a transaction here must first be
        confirmed by the transaction coordinator (apis/produce.py asks it). Batches after the first
        of a transaction need no check: producer state already ties them to the open transaction."""
        if not h.is_transactional or h.producer_id < 0:
            return False
        entry = self.producer(h.producer_id)
        return entry is None or entry.current_txn_first_offset is None or entry.epoch != h.producer_epoch

    def _check_guard(self, records: bytes | bytearray | memoryview, guard: VerificationGuard) -> int:
        """The producer id of a batch whose verification still holds (raises INVALID_TXN_STATE
        when a marker ended the transaction since); -1 when its transaction is already open here."""
        h = read_header(records)
        entry = self.producer(h.producer_id)
        if entry is not None and entry.current_txn_first_offset is not None and entry.epoch == h.producer_epoch:
            return -1  # an earlier batch of this transaction opened it: nothing left to guard
        if self._verifying.get(h.producer_id) is not guard:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                             f"the transaction of producer {h.producer_id} ended in {self.topic}-{self.index} "
                             "while its verification was in flight")
        lowest = guard.lowest_sequence
        if lowest is not None and h.producer_epoch == guard.epoch and h.base_sequence > lowest:
            raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                             f"producer {h.producer_id} sequence {h.base_sequence} cannot open its transaction in "
                             f"{self.topic}-{self.index} before sequence {lowest}, which is being verified")
        return h.producer_id

    def append(self, records: bytes | bytearray | memoryview, origin: AppendOrigin,
               required_acks: int = 1, *, transactional: bool = False,
               guard: VerificationGuard | None = None) -> AppendResult:
        """Append as leader (CLIENT, COORDINATOR) or as follower (REPLICATION).

        CLIENT batches are validated first (framing, CRC, size, no control batches, the
        transactional flag matching the request) — nothing a client sends is stored unchecked.
        With required_acks=-1 the append is refused up front when the ISR is already smaller
        than min.insync.replicas; waiting for the ISR afterwards is `replicated()`. A batch
        that passed a KIP-890 check carries its `guard` (see VerificationGuard).
        """
        if origin is AppendOrigin.REPLICATION:
            if self._state.role != Role.FOLLOWER:
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                 f"{self.topic}-{self.index}: replication append on a non-follower")
            try:
                res = self._log.append(records, leader_epoch=-1, assign_offsets=False)
            except (OSError, KafkaError) as e:
                self._reraise(e)
            self._apply_flush_policy()  # in the background: a follower acknowledges nothing itself
            return res
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"This server is not the leader for partition {self.topic}-{self.index}")
        if origin is AppendOrigin.CLIENT:
            validate_client_batches(records, self._log.config.max_message_bytes, transactional)
        guarded = -1 if guard is None else self._check_guard(records, guard)
        if required_acks == -1:
            min_insync_replicas = self._log.config.min_insync_replicas
            code = self._state.check_min_isr(min_insync_replicas)
            if code:
                raise KafkaError(code, f"The size of the current ISR {sorted(self._state.isr)} is insufficient "
                                       f"to satisfy the min.isr requirement of {min_insync_replicas} for "
                                       f"partition {self.topic}-{self.index}")
        try:
            res = self._log.append(records, leader_epoch=self.leader_epoch)
        except (OSError, KafkaError) as e:
            self._reraise(e)
        self._apply_flush_policy()
        if guarded >= 0:
            del self._verifying[guarded]  # the transaction is open here now
        elif origin is AppendOrigin.COORDINATOR and self._verifying:
            h = read_header(records)
            if h.is_control:
                self._verifying.pop(h.producer_id, None)  # a marker: the transaction is over here
        if self._state.on_local_append(self._log.log_end_offset, self._clock.monotonic_ms()):
            self._advance_high_watermark()
        self.notify()
        return res

    def _reraise(self, e: OSError | KafkaError) -> NoReturn:
        """Raise what `_storage_error` makes of an error out of the log (in its except block)."""
        failure = self._storage_error(e)
        if failure is e:
            raise e
        raise failure from e

    def _storage_error(self, e: OSError | KafkaError) -> KafkaError:
        """What to raise for an error out of the log: a disk's I/O error (an OSError, or the
        KAFKA_STORAGE_ERROR a segment raises for one) is reported, so the log directory goes
        offline with every partition in it (Kafka's LogDirFailureChannel); anything else as it is."""
        cause = e if isinstance(e, OSError) else e.__cause__
        if not isinstance(cause, OSError):
            assert isinstance(e, KafkaError)
            return e
        if self.on_storage_error is not None:
            self.on_storage_error(self, cause)
        return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                          f"Error while writing to or reading from partition {self.topic}-{self.index}: {cause}")

    def go_offline(self) -> None:
        """The log directory failed: close the log without writing to it; waiters answer."""
        self.offline = True
        self._log.release()
        self.notify()

    def discard(self) -> None:
        """The replica goes away with its directory (its topic deleted, or moved to other
        brokers): close the log without writing to it — nothing will read those files again;
        waiters answer."""
        self._log.release()
        self.notify()

    def _apply_flush_policy(self) -> None:
        """flush_messages / flush_ms: the flush runs off the loop (group commit's thread, shared
        with the appends of this loop turn), not inline in the append. After a roll the closed
        segments are flushed too, whatever the policy (PartitionLog.rolled_unflushed), in the
        background: no answer waits for that one, and one at a time is enough."""
        if self._log.flush_due():
            self.flush_wait = self._group_commit.flush(self._log)
            return
        self.flush_wait = None
        if self._roll_flush is None and self._log.rolled_unflushed():
            self._roll_flush = self._group_commit.flush_later(self._log)
            if self._roll_flush is not None:
                self._roll_flush.add_done_callback(self._roll_flushed)

    def _roll_flushed(self, fut: asyncio.Future[None]) -> None:
        self._roll_flush = None
        if not fut.cancelled():
            fut.exception()  # taken: a failed flush is group commit's on_error to report

    async def made_durable(self) -> None:
        """Everything appended so far survives a power loss: what a coordinator waits for before
        it acts on its own append (a transaction step, a marker). With one replica only the disk
        can promise that, so the log is fsynced (grouped with every other append of this loop
        turn); raises what the flush raised."""
        await self._group_commit.sync(self._log)

    async def replicated(self, end_offset: int, timeout_s: float) -> ErrorCode:
        """Wait until the ISR has everything before `end_offset` (acks=all); the error to answer."""
        deadline = self._clock.monotonic() + timeout_s
        while True:
            if self.offline:
                return ErrorCode.KAFKA_STORAGE_ERROR
            outcome = self._state.acks_all_outcome(end_offset, self._log.config.min_insync_replicas)
            if outcome is not None:
                return outcome
            if not await self.changed_before(deadline):
                return ErrorCode.REQUEST_TIMED_OUT

    async def changed_before(self, deadline: float) -> bool:
        """Wait for the next notify() (new data, a moved HW, a lost leadership) until `deadline`
        (the clock's monotonic seconds); False if the deadline had passed already."""
        remaining = deadline - self._clock.monotonic()
        if remaining <= 0:
            return False
        await wait_for_change((self,), remaining)
        return True

    def delete_records(self, offset: int) -> int:
        """DeleteRecords on the leader, as Kafka's Partition.deleteRecordsOnLeader: moves the log
        start and returns the offset the low watermark must reach before the answer
        (`replicas_deleted_before`).

        Only a topic whose cleanup.policy includes delete may lose records this way: on a compacted
        topic the log start is the cleaner's business, and Kafka refuses with POLICY_VIOLATION.
        """
        self._check_leader()
        if not self._log.config.deletes:
            raise KafkaError(ErrorCode.POLICY_VIOLATION,
                             f"Records of partition {self.topic}-{self.index} can not be deleted due to the "
                             f"configured policy")
        target = self._log.high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"The offset {target} for partition {self.topic}-{self.index} is not valid")
        before = self._log.log_start_offset
        start = self._log.delete_records_before(target)
        if start != before:
            logger.info("log start offset moved by DeleteRecords", topic=self.topic, partition=self.index,
                        log_start_offset=start, previous=before)
            # Parked fetches re-check their offsets: one now below the start gets OFFSET_OUT_OF_RANGE,
            # and a follower's learns the new start at once.
            self.notify()
        return target

    @property
    def low_watermark(self) -> int:
        return self._state.low_watermark(self._log.log_start_offset)

    async def replicas_deleted_before(self, offset: int, timeout_s: float) -> tuple[int, ErrorCode]:
        """Wait until no live replica holds records below `offset` (Kafka's DelayedDeleteRecords):
        (low watermark, NONE); (low watermark, REQUEST_TIMED_OUT) when the time ran out first;
        (-1, NOT_LEADER_OR_FOLLOWER) when the leadership went."""
        deadline = self._clock.monotonic() + timeout_s
        while True:
            if not self.is_leader:
                return -1, ErrorCode.NOT_LEADER_OR_FOLLOWER
            low = self.low_watermark
            if low >= offset:
                return low, ErrorCode.NONE
            if not await self.changed_before(deadline):
                return low, ErrorCode.REQUEST_TIMED_OUT

    # ---- replication: the leader's side -------------------------------------------------------
    def diverging(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        """A follower's log that parts from ours: (epoch, end offset) it must truncate to, or None.
        Kafka's check on a replica fetch (KIP-320 via Fetch v12+): the follower's last epoch must
        be one of ours and its fetch offset must not pass where that epoch ends here; otherwise
        the answer is our largest epoch not above the follower's, and where it ends here."""
        if last_fetched_epoch < 0 or broken("truncate"):
            return None
        if last_fetched_epoch == self._state.leader_epoch and fetch_offset <= self._log.log_end_offset:
            return None  # the common case, decided as below without the epoch cache
        # Our history with the epoch we lead in: a follower's last epoch that we never wrote
        # under ends where the next one of ours starts, not at our log start.
        epoch, end = self.end_offset_for_epoch(last_fetched_epoch)
        if epoch < 0:
            # Newer than the epoch we lead in (the follower's current epoch is ours, or its fetch
            # was fenced): a history we never had. Our largest epoch not above its one is ours.
            epoch, end = self.leader_epoch, self._log.log_end_offset
        if epoch != last_fetched_epoch or end < fetch_offset:
            return epoch, end
        return None

    def on_follower_fetch(self, replica: int, fetch_offset: int, log_start_offset: int,
                          broker_epoch: int = -1) -> IsrChange | None:
        """A follower fetched from `fetch_offset` (its log end), its log start at
        `log_start_offset`: the high watermark may move, parked acks=all produces may complete, so
        may parked DeleteRecords, and the follower may rejoin the ISR (the change to ask the
        controller for)."""
        now = self._clock.monotonic_ms()
        if self._state.on_repeated_fetch(replica, fetch_offset, self._log.log_end_offset, now, log_start_offset,
                                         broker_epoch):
            return None
        low = self.low_watermark
        if self._state.on_follower_fetch(replica, fetch_offset, self._log.log_end_offset, now, log_start_offset,
                                        broker_epoch):
            self._advance_high_watermark()
            self.notify()
        elif self.low_watermark > low:
            self.notify()
        return self._state.isr_expansion(self._log.log_end_offset)

    def isr_shrink(self) -> IsrChange | None:
        """Followers that fell behind for replica.lag.time.max.ms: the change to ask for."""
        return self._state.isr_shrink(self._log.log_end_offset, self._clock.monotonic_ms())

    def member_epochs(self, isr: frozenset[int], own_epoch: int) -> list[tuple[int, int]]:
        """The members of an ISR change with the broker epochs the AlterPartition names (KIP-903)."""
        return self._state.member_epochs(isr, own_epoch)

    def on_isr_change_result(self, change: IsrChange, error: ErrorCode, committed: Assignment | None) -> None:
        """The controller's answer to `change` (ReplicaState.on_isr_change_result)."""
        self._state.on_isr_change_result(change, error, committed)

    def set_ineligible(self, brokers: Iterable[int]) -> None:
        """Brokers fenced or shutting down, which may not (re)join the ISR (KIP-841)."""
        self._state.set_ineligible(brokers)

    async def caught_up_as_leader(self) -> bool:
        """Wait, however long it takes, until the high watermark covers the log as it stood when
        this leader epoch began: a coordinator loading the partition must neither miss a record
        its predecessor appended (and perhaps acknowledged) nor read one that may be truncated.
        False as soon as the leadership goes or its epoch changes (the wait was for that election),
        or the replica is closed (moved off this broker, deleted)."""
        epoch = self.leader_epoch
        # issue 23 item 7 taken back: the old 10 s wait, then a load up to the high watermark anyway
        deadline = self._clock.monotonic() + 10.0 if broken("load-to-end") else None
        while self.is_leader and self.leader_epoch == epoch and not self._log.closed:
            if self._log.high_watermark >= self._state.leader_epoch_start_offset:
                return True
            if deadline is not None and self._clock.monotonic() >= deadline:
                return True
            await wait_for_change((self,), None if deadline is None else deadline - self._clock.monotonic())
        return False

    # ---- replication: the follower's side ------------------------------------------------------
    def append_replicated(self, records: bytes | memoryview, leader_high_watermark: int,
                          leader_log_start: int) -> None:
        """Batches copied from the leader (its offsets and epochs kept), then the leader's high
        watermark as far as this log reaches, then the leader's log start."""
        if records:
            self.append(records, AppendOrigin.REPLICATION)
        if self._state.on_leader_high_watermark(leader_high_watermark, self._log.log_end_offset):
            self._log.high_watermark = self._state.high_watermark
        if leader_log_start > self._log.log_start_offset:
            # may raise our high watermark with it (storage/log.py follow_log_start)
            try:
                start = self._log.follow_log_start(leader_log_start)
            except (OSError, KafkaError) as e:
                self._reraise(e)
            self._state.on_log_start(start)

    def truncate_to_divergence(self, epoch: int, end_offset: int) -> int:
        """The leader says our log parts from its at `epoch` ending at `end_offset`: cut ours back
        to where both agree (Kafka's follower truncation). Returns the new log end."""
        mine_epoch, mine_end = self._log.end_offset_for_epoch(epoch)
        if epoch < 0 or mine_epoch < 0:
            target = min(self._log.high_watermark, self._log.log_end_offset)
        elif mine_epoch == epoch:
            target = min(end_offset, mine_end)
        else:
            target = min(mine_end, self._log.log_end_offset)
        if target < self._log.log_end_offset:
            logger.info("truncating follower log after divergence", topic=self.topic, partition=self.index,
                        to=target, was=self._log.log_end_offset, leader_epoch=epoch)
            try:
                self._log.truncate_to(target)
            except (OSError, KafkaError) as e:
                self._reraise(e)
            self._state.on_truncate(target)
        return self._log.log_end_offset

    def restart_at(self, offset: int) -> None:
        """The leader has nothing from our log end on (its log starts later): start over there."""
        logger.info("follower log restarts at the leader's log start", topic=self.topic, partition=self.index,
                    offset=offset)
        try:
            self._log.truncate_fully_and_start_at(offset)
        except (OSError, KafkaError) as e:
            self._reraise(e)
        self._state.on_truncate(offset)

    # ---- reads ------------------------------------------------------------------------------
    def check_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """Kafka's leader-epoch fencing: a client that knows a newer epoch than ours is ahead of
        our metadata (retry), one that knows an older one is behind (refresh)."""
        mine = self._state.leader_epoch
        if current_leader_epoch < 0 or current_leader_epoch == mine:
            return ErrorCode.NONE
        return ErrorCode.UNKNOWN_LEADER_EPOCH if current_leader_epoch > mine else ErrorCode.FENCED_LEADER_EPOCH

    def _check_leader(self) -> None:
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"This server is not the leader for partition {self.topic}-{self.index}")

    def read(self, offset: int, max_bytes: int, isolation: Isolation,
             current_leader_epoch: int = -1) -> PartitionRead:
        """Whole batches from `offset`, bounded by what `isolation` may see.

        At READ_COMMITTED the aborted transactions overlapping the returned data are listed (up to
        the end of the data returned, not the LSO: a consumer needs no more, and looking further
        would load later segments' transaction indexes for nothing).
        """
        plog = self._log
        hw, lso, start, leo = plog.high_watermark, plog.last_stable_offset, plog.log_start_offset, plog.log_end_offset
        code = ErrorCode.NONE
        if isolation is not Isolation.LOG_END and not self.is_leader:
            code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        else:
            code = self.check_epoch(current_leader_epoch)
        if code:
            return PartitionRead(code, b"", hw, lso, start, leo, None, offset)
        upper = {Isolation.READ_UNCOMMITTED: hw, Isolation.READ_COMMITTED: lso, Isolation.LOG_END: leo}[isolation]
        try:
            if upper <= offset <= leo:
                data: bytes | memoryview = b""
                next_offset = offset
            else:
                r = plog.read(offset, max_bytes, upper_bound=upper)
                data, next_offset = r.data, r.next_offset
            aborted = None
            if isolation is Isolation.READ_COMMITTED:
                aborted = plog.aborted_transactions(offset, next_offset) if data else []
        except (OSError, KafkaError) as e:
            code = self._storage_error(e).code
            return PartitionRead(code, b"", hw, lso, start, leo, None, offset)
        return PartitionRead(ErrorCode.NONE, data, hw, lso, start, leo, aborted, next_offset)

    def offset_for(self, timestamp: int, isolation: Isolation, current_leader_epoch: int = -1) -> tuple[int, int]:
        """ListOffsets: (offset, timestamp) for a timestamp or one of the special values
        (latest, earliest, max timestamp); (-1, -1) when no record qualifies.

        A new leader's high watermark is what it knew as a follower until the ISR has fetched up
        to where its epoch began: until then "latest", and a record at or past the high
        watermark, are OFFSET_NOT_AVAILABLE (retriable), not an offset that would move back later
        or a "no such record" (Kafka's Partition.fetchOffsetForTimestamp)."""
        self._check_leader()
        code = self.check_epoch(current_leader_epoch)
        if code:
            raise KafkaError(code)
        plog = self._log
        upper = plog.last_stable_offset if isolation is Isolation.READ_COMMITTED else plog.high_watermark
        if timestamp == EARLIEST_TIMESTAMP:
            return plog.log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            self._check_high_watermark_caught_up()
            return upper, -1
        if timestamp == MAX_TIMESTAMP:
            found = plog.max_timestamp_offset()
            timestamp = found[1] if found else -1  # then name the record holding it, as below
        elif timestamp < 0:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown special timestamp {timestamp}")
        else:
            found = plog.offset_for_timestamp(timestamp)
        if found is not None:
            offset, ts = self._exact(found[0], timestamp) or found
            if offset < upper:
                return offset, ts
        self._check_high_watermark_caught_up()
        return -1, -1

    def _check_high_watermark_caught_up(self) -> None:
        epoch_start = self._state.leader_epoch_start_offset
        if epoch_start > self._log.high_watermark:
            raise KafkaError(ErrorCode.OFFSET_NOT_AVAILABLE,
                             f"Failed to fetch offsets for partition {self.topic}-{self.index} with leader epoch "
                             f"{self.leader_epoch} as this partition's high watermark ({self._log.high_watermark}) "
                             f"is lagging behind the start offset from the beginning of this epoch ({epoch_start}).")

    def _exact(self, batch_offset: int, timestamp: int) -> tuple[int, int] | None:
        """The index finds the batch; Kafka answers with the record, so decode that one batch."""
        data = self._log.read(batch_offset, 1).data
        if len(data) < HEADER_SIZE:
            return None
        for r in decode_batch(data)[1]:
            if r.timestamp >= timestamp and r.offset >= batch_offset:
                return r.offset, r.timestamp
        return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, its end offset) as OffsetForLeaderEpoch answers; (-1, -1) unknown.

        Kafka's leader writes its epoch into the history the moment it becomes leader; ours enters
        it with the first append under that epoch. Until then the current epoch is added here,
        starting at the log end, so that asking for it (a consumer whose position is current)
        gets the log end rather than UNDEFINED.
        """
        entries = self._log.leader_epochs
        leo = self._log.log_end_offset
        if self.is_leader and (not entries or entries[-1][0] < self.leader_epoch):
            entries = [(e, start) for e, start in entries if start < leo] + [(self.leader_epoch, leo)]
        return end_offset_for(entries, epoch, leo)

    def producer(self, producer_id: int) -> ProducerEntry | None:
        return self._log.producer_state.get(producer_id)

    def active_producers(self) -> list[ProducerEntry]:
        return sorted(self._log.producer_state.active_producers.values(), key=lambda e: e.producer_id)

    @property
    def size_in_bytes(self) -> int:
        return self._log.size_in_bytes

    @property
    def segment_count(self) -> int:
        return self._log.segment_count

    def replace_log(self, log: PartitionLog) -> None:
        """The replica's log moved to another log directory (broker/partition/move.py): `log` holds
        every batch, offset and the high watermark of the one it replaces."""
        self._log = log
        self.notify()

    def update_config(self, config: LogConfig) -> None:
        self._log.update_config(config)
        self._state.min_isr = config.min_insync_replicas

    # ---- housekeeping (broker/housekeeping.py runs it) ------------------------------------------
    async def maintain(self, now_ms: int, write: Callable[[Callable[[], bool]], Awaitable[bool]], *,
                       retention: bool, expiry: bool) -> None:
        """One housekeeping pass: forget idle producers (`expiry`), checkpoint (`write` runs the
        writes, on the logs' I/O thread), flush what flush.ms asks for when appends stopped; with
        `retention`, delete old segments, waking parked fetches when that moves the log start as
        DeleteRecords does, and compact. The log is looked up after every await: a move to
        another log directory may have swapped it meanwhile."""
        if expiry:
            self._log.expire_producers(now_ms)  # never one with an open transaction
        if self._log.closed:
            return  # deleted (or the broker stopping) while an earlier partition's writes ran
        job = self._log.begin_checkpoint()
        if job.writes_anything:
            await write(functools.partial(self._log.write_checkpoint, job))
            if self._log.closed:
                return
        if self._log.flush_due(now_ms):  # flush_ms holds when appends stop, too
            await self._group_commit.flush(self._log)
        if not retention:
            return
        start = self._log.log_start_offset
        deleted = self._log.apply_retention(now_ms)
        if self._log.log_start_offset != start:
            self.notify()  # a fetch parked below the new start answers OFFSET_OUT_OF_RANGE now
        retired = self._log.take_retired_files()  # also DeleteRecords' since the last pass
        if retired:
            await asyncio.to_thread(unlink_all, self._log.fs, retired)
        if deleted:
            logger.info("retention deleted segments", topic=self.topic, partition=self.index, segments=deleted)
        if self._log.config.compacts:
            await self.compact(now_ms)

    async def compact(self, now_ms: int) -> cleaner.CleanStats:
        """One compaction pass, its long part in a worker thread (storage/cleaner.py)."""
        job = cleaner.prepare(self._log, now_ms=now_ms)
        if isinstance(job, cleaner.CleanStats):
            return job
        try:
            cleaned = await asyncio.to_thread(cleaner.run, job)
        finally:
            job.close()
        return cleaner.install(self._log, job, cleaned)  # discards the pass if the log changed meanwhile

    # ---- parked requests --------------------------------------------------------------------
    def notify(self) -> None:
        """Wake requests parked on this partition (`wait_for_change`): new data, a moved HW, LSO
        or log start, a lost leadership, a closed log."""
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for w in waiters:
                w.changed.append(self)
                if not w.future.done():
                    w.future.set_result(None)

    def close(self) -> None:
        self.notify()
        self._log.close()


class Parked:
    """One wait parked on several partitions, and which of them notified since it parked: a
    fetch over a follower's whole session that wakes for one partition reads that one again,
    not all of them (nothing else changed: every change that matters to a read notifies)."""

    __slots__ = ("future", "changed")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future
        self.changed: list[Partition] = []


async def wait_for_change(parts: Sequence[Partition], timeout_s: float | None) -> list[Partition]:
    """Park until one of `parts` notifies, or `timeout_s` passed (None: however long it takes);
    the partitions that notified meanwhile (empty at the timeout), each once, in `parts`' order
    of notifying. A fetch over many partitions parks once on all of them and wakes on whichever
    moves first; Partition's own waits (acks=all, DeleteRecords, a coordinator's load) are the
    one-partition case."""
    parked = Parked(asyncio.get_running_loop().create_future())
    for p in parts:
        p._waiters.append(parked)
    try:
        async with asyncio.timeout(timeout_s):  # not wait_for: in 3.11 it adds a loop turn to every wake
            await parked.future
    except TimeoutError:
        pass
    finally:
        for p in parts:
            if parked in p._waiters:
                p._waiters.remove(parked)
    return list(dict.fromkeys(parked.changed))
