"""The transaction coordinator's asyncio shell: log writes, recovery, waiting, timers.

All decisions are machine.TxnStateMachine's; this module gives them effect in the only safe
order — the record is appended to `__transaction_state` first, and only then does the cache
change, the client get its answer, or the markers go out (docs/transactions.md). On start the cache is
rebuilt from that log, and every transaction found in PrepareCommit/PrepareAbort gets its
markers sent again: markers are idempotent at the partition leaders (a second marker for an
already-ended transaction ends nothing), so re-sending is always safe.

One departure from Kafka, for latency: a request that would be answered CONCURRENT_TRANSACTIONS
because the previous transaction is still completing (markers in flight) first waits up to
CONCURRENT_WAIT_S for that completion and is then decided again. The client would otherwise retry
after its backoff (20-100 ms), which dominates the cost of small transactions; the answer it gets
is the one its retry would have got.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from protocol.clock import Clock
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from protocol.records import Record, build_batch, decode_batches
from protocol.topic_partition import TopicPartition
from storage.faults import broken, crash_point

from ..partition import AppendOrigin, Isolation
from ..wire import Channel, WireError, WireSecurity
from .log_records import TxnLogFormatError, decode_key, decode_value, encode_key, encode_value
from .machine import Decision, MarkerJob, TxnStateMachine
from .markers import DELETED
from .sender import MarkerSender
from .state import TxnMetadata, TxnRecord, TxnState

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..metrics import BrokerMetrics
    from ..partition import Partition
    from ..producer_ids import ProducerIdAllocator
    from ..topics import Topic, TopicTable

log = structlog.get_logger()
T = TypeVar("T")

TOPIC = "__transaction_state"
CONCURRENT_WAIT_S = 2.0
VERIFY_TIMEOUT_S = 5.0  # a verification asked of another broker
REPLICATION_TIMEOUT_S = 5.0  # a __transaction_state append must reach the in-sync replicas by then
_LOAD_READ_BYTES = 1024 * 1024
_COMPLETIONS = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})


def _done(d: Decision) -> asyncio.Future[Decision]:
    fut: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
    fut.set_result(d)
    return fut


def _decoded(partition: int, data: bytes | memoryview) -> list[tuple[str, TxnRecord | None]]:
    """The (transactional id, value) records of whole batches read from a `__transaction_state`
    partition; control batches and keyless records are not coordinator state."""
    out: list[tuple[str, TxnRecord | None]] = []
    for h, records in decode_batches(data):
        if h.is_control:
            continue
        for rec in records:
            if rec.key is None:
                continue
            try:
                out.append((decode_key(rec.key), None if rec.value is None else decode_value(rec.value)))
            except TxnLogFormatError as e:
                # Refusing to start beats guessing the outcome of someone's transaction.
                raise RuntimeError(f"{TOPIC}-{partition} offset {rec.offset}: {e}") from e
    return out


# Storage errors of a `__transaction_state` append, as the client should see them (Kafka's mapping).
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


class TransactionCoordinator:
    def __init__(self, cfg: BrokerConfig, topics: TopicTable, producer_ids: ProducerIdAllocator,
                 metrics: BrokerMetrics, clock: Clock,
                 broker_address: Callable[[int], tuple[str, int] | None], security: WireSecurity | None = None) -> None:
        self.cfg = cfg
        self.topics = topics
        self.metrics = metrics
        self.clock = clock
        self.machine = TxnStateMachine(
            num_partitions=cfg.transaction_state_num_partitions, max_timeout_ms=cfg.transaction_max_timeout_ms,
            id_expiration_ms=cfg.transactional_id_expiration_ms,
            allocate_producer_id=producer_ids.allocate, allow_2pc=cfg.transaction_two_phase_commit_enable)
        self.sender = MarkerSender(cfg.node_id, self._leader_of, broker_address, clock, self._on_markers_done,
                                   security=security)
        # Verification's own connections: never queued behind (or closed with) a marker (wire.Channel).
        self._verification = Channel(broker_address, f"ketch-txn-verify-{cfg.node_id}", security)
        self._waiters: dict[str, list[Callable[[], None]]] = {}  # requests waiting for an id to change
        self._tasks: dict[asyncio.Task[Any], None] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._owned: set[int] = set()
        self._loading: set[int] = set()  # partitions whose leadership came here, not loaded yet

    # ---- lifecycle ----------------------------------------------------------------------------
    def load(self) -> None:
        """Rebuild the cache from `__transaction_state` (before the listener opens, so no request
        ever sees a half-loaded coordinator). A broker that never saw a transaction has no such
        topic yet: ensure_topic creates it on first need."""
        topic = self.topics.get(TOPIC)
        if topic is not None:
            self._load_topic(topic)
        self.topics.listeners.append(self._on_partition)

    def _on_partition(self, topic: str, partition: Partition, leads: bool) -> None:
        """Leadership of a `__transaction_state` partition came here — load its transactions
        under the new coordinator epoch (its leader epoch) and finish every PrepareCommit /
        PrepareAbort found by sending the markers again — or went elsewhere: forget them."""
        if topic != TOPIC:
            return
        i = partition.index
        if leads and i not in self._owned and i not in self._loading:
            t = self.topics.get(TOPIC)
            if t is not None:
                self.machine.num_partitions = t.num_partitions
            self._loading.add(i)
            task = asyncio.get_running_loop().create_task(self._take_over(partition))
            self._tasks[task] = None
            task.add_done_callback(lambda done: self._tasks.pop(done, None))
        elif not leads and i in self._owned:
            self._owned.discard(i)
            self.machine.unload_partition(i)
            dropped = self.sender.drop(lambda job: self.machine.partition_of(job.transactional_id) == i)
            log.info("transaction state unloaded: the partition is led elsewhere", partition=i,
                     marker_jobs_dropped=dropped)

    async def _take_over(self, partition: Partition) -> None:
        """Load a partition whose leadership came here once everything its log held at the
        election is committed, however long the in-sync replicas take: loaded any earlier, a
        PrepareCommit past the high watermark would be missed, the transaction found Ongoing and
        aborted after its client was told it committed. Meanwhile its ids are not served
        (FindCoordinator names this broker, as Kafka does; requests answer COORDINATOR_LOAD_IN_PROGRESS)."""
        i = partition.index
        try:
            while not await partition.caught_up_as_leader():
                if not partition.is_leader or partition.closed:
                    return  # led elsewhere now, or no longer here: nothing to load
                # re-elected under a new epoch meanwhile: wait for that election's log end
            loaded = await self._load_partition_in_steps(partition)
            if loaded is None:
                return
            jobs = [j for j in self.machine.recovered_jobs() if self.machine.partition_of(j.transactional_id) == i]
            self._resend(jobs)
            if loaded:
                log.info("transaction state loaded: this broker leads the partition now", partition=i,
                         records=loaded, coordinator_epoch=partition.leader_epoch, completing=len(jobs))
        finally:
            self._loading.discard(i)

    async def ensure_topic(self) -> None:
        """Create `__transaction_state` when a transactional id first looks for its coordinator,
        as Kafka does, so brokers that never run transactions carry no 50 idle partitions."""
        cfg = self.cfg
        await self.topics.ensure_internal(
            TOPIC, cfg.transaction_state_num_partitions, cfg.transaction_state_replication_factor,
            {"cleanup.policy": "compact", "segment.bytes": str(cfg.transaction_state_segment_bytes)})

    def _load_topic(self, topic: Topic) -> None:
        if topic.num_partitions != self.machine.num_partitions:
            # The records already sit where the old count put them: keep using it.
            log.warning("__transaction_state has a different partition count than configured; using it",
                        partitions=topic.num_partitions, configured=self.machine.num_partitions)
            self.machine.num_partitions = topic.num_partitions
        loaded = 0
        for part in topic.partitions:
            if part.is_leader:
                loaded += self._load_partition(part)
        prepared = self.machine.recovered_jobs()
        log.info("transaction coordinator loaded", transactional_ids=len(self.machine.txns), records=loaded,
                 completing=len(prepared))

    def _chunks(self, part: Partition) -> Iterator[bytes | memoryview]:
        """Start the partition's state over and read its log, one chunk of whole batches at a
        time (each read is made only when the next chunk is asked for)."""
        self.machine.unload_partition(part.index)
        self.machine.coordinator_epochs[part.index] = part.leader_epoch
        offset = part.log_start_offset
        while (r := part.read(offset, _LOAD_READ_BYTES, Isolation.READ_UNCOMMITTED)).records and not r.error:
            yield r.records  # committed records only
            offset = r.next_offset

    def _apply(self, loaded: list[tuple[str, TxnRecord | None]]) -> int:
        for tid, value in loaded:
            self.machine.load(tid, value)
        return len(loaded)

    def _load_partition(self, part: Partition) -> int:
        """At start, before any request can arrive: in one go."""
        count = sum(self._apply(_decoded(part.index, chunk)) for chunk in self._chunks(part))
        self._owned.add(part.index)
        return count

    async def _load_partition_in_steps(self, part: Partition) -> int | None:
        """While the broker serves: a large partition's records take seconds of Python to decode,
        which on the event loop stalled every request, replica fetch and heartbeat of the broker
        (the chaos campaign saw ~20 s). So each chunk is decoded in a worker thread (from a copy:
        the log may change meanwhile) and only applied on the loop, and the partition's ids are not
        served (not owned) until the whole log is in. Loaded again if the leadership changed epoch
        meanwhile; None if it went elsewhere."""
        while True:
            epoch = part.leader_epoch
            count = 0
            for chunk in self._chunks(part):
                loaded = await asyncio.to_thread(_decoded, part.index, bytes(chunk))
                if not part.is_leader or part.leader_epoch != epoch:
                    break
                count += self._apply(loaded)
            else:
                if part.is_leader and part.leader_epoch == epoch:
                    self._owned.add(part.index)
                    return count
            self.machine.unload_partition(part.index)
            if not part.is_leader:
                return None

    async def start(self) -> None:
        self.sender.start()
        self._resend(self.machine.recovered_jobs())
        self._reaper = asyncio.get_running_loop().create_task(self._reap_loop())

    def _resend(self, jobs: list[MarkerJob]) -> None:
        """The markers of transactions a load found prepared: whether the log was loaded at start
        or taken over later (logs open off the loop, so either may come first), they are sent
        again, and the operator is told the same way."""
        for job in jobs:
            log.info("resending markers of a transaction found prepared", transactional_id=job.transactional_id,
                     commit=job.commit, partitions=len(job.partitions))
            self.sender.add(job)

    async def stop(self) -> None:
        if self._reaper:
            self._reaper.cancel()
        for t in list(self._tasks):
            t.cancel()
        await self.sender.stop()
        self._verification.close()

    def _leader_of(self, tp: TopicPartition) -> int:
        """The broker that must write a marker for `tp` as the metadata image names it (-1: none
        right now); DELETED once its topic is gone."""
        info = self.topics.image.topics.get(tp[0])
        if info is None or not 0 <= tp[1] < len(info.partitions):
            return DELETED
        return info.partitions[tp[1]].leader

    # ---- what handlers call -------------------------------------------------------------------
    def owns(self, tid: str) -> bool:
        return self.machine.partition_of(tid) in self._owned

    def not_served(self, tid: str) -> ErrorCode:
        """Why a request for `tid` cannot be decided here: its partition is still being taken
        over (COORDINATOR_LOAD_IN_PROGRESS, retried by clients) or is led elsewhere; NONE if served."""
        i = self.machine.partition_of(tid)
        if i in self._owned:
            return ErrorCode.NONE
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if i in self._loading or self._opening(i) \
            else ErrorCode.NOT_COORDINATOR

    def _opening(self, index: int) -> bool:
        """The metadata names this broker the leader of `__transaction_state`-`index` and its log
        is not open here yet (logs open off the loop): FindCoordinator already names this broker,
        so the client is told to retry, not to look elsewhere."""
        info = self.topics.image.topics.get(TOPIC)
        if info is None or not 0 <= index < len(info.partitions) or info.partitions[index].leader != self.cfg.node_id:
            return False
        t = self.topics.get(TOPIC)
        return t is None or index not in t.local

    def partition_for(self, tid: str) -> int:
        return self.machine.partition_of(tid)

    async def init_producer_id(self, tid: str, timeout_ms: int, producer_id: int, producer_epoch: int, *,
                               enable_2pc: bool = False, keep_prepared: bool = False) -> Decision:
        return await self._decide(tid, lambda: self.machine.init_producer_id(
            tid, timeout_ms, producer_id, producer_epoch, self.clock.now_ms(), enable_2pc=enable_2pc,
            keep_prepared=keep_prepared))

    async def add_partitions(self, tid: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> ErrorCode:
        parts = list(partitions)
        d = await self._decide(tid, lambda: self.machine.add_partitions(tid, producer_id, producer_epoch, parts,
                                                                          self.clock.now_ms()))
        return d.error

    async def end_txn(self, tid: str, producer_id: int, producer_epoch: int, commit: bool, *,
                      bump_epoch: bool) -> Decision:
        return await self._decide(tid, lambda: self.machine.end_txn(tid, producer_id, producer_epoch, commit,
                                                                      self.clock.now_ms(), bump_epoch=bump_epoch))

    def verify(self, tid: str, producer_id: int, producer_epoch: int,
               partitions: Iterable[TopicPartition]) -> ErrorCode:
        """KIP-890 verification: is each partition in the producer's ongoing transaction?"""
        if err := self.not_served(tid):
            return err
        return self.machine.verify(tid, producer_id, producer_epoch, partitions)

    async def verify_anywhere(self, tid: str, producer_id: int, producer_epoch: int,
                              partitions: Sequence[TopicPartition]) -> ErrorCode:
        """`verify`, asking the coordinator of `tid` over the wire when it is another broker
        (AddPartitionsToTxn v4 with verify_only, as Kafka's partition leaders do)."""
        if self.owns(tid):
            return self.verify(tid, producer_id, producer_epoch, partitions)
        node = self._leader_of(TopicPartition(TOPIC, self.partition_for(tid)))
        if node < 0 or node == self.cfg.node_id:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        request = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
            transactional_id=tid, producer_id=producer_id, producer_epoch=producer_epoch, verify_only=True,
            topics=[AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()])])
        try:
            conn = await self._verification.connection(node)
            resp = await conn.request(request, version=max(4, min(conn.version_for(AddPartitionsToTxnRequest), 5)),
                                      timeout=VERIFY_TIMEOUT_S)
        except (WireError, OSError) as e:
            log.info("transaction verification with the coordinator failed", broker=node, error=str(e))
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if resp.error_code:
            return ErrorCode(resp.error_code)
        codes = [r.partition_error_code for tx in resp.results_by_transaction for t in tx.topic_results
                 for r in t.results_by_partition if r.partition_error_code]
        return ErrorCode(codes[0]) if codes else ErrorCode.NONE

    def describe(self, tid: str) -> TxnMetadata | None:
        return self.machine.get(tid)

    def visible_state(self, meta: TxnMetadata) -> TxnState:
        return self.machine.visible_state(meta)

    def all(self) -> list[TxnMetadata]:
        return list(self.machine.txns.values())

    # ---- running decisions --------------------------------------------------------------------
    async def _decide(self, tid: str, decide: Callable[[], Decision]) -> Decision:
        deadline = self.clock.monotonic() + CONCURRENT_WAIT_S
        pending = self._begin_decision(tid, decide)
        while True:
            d = await asyncio.shield(pending)
            remaining = deadline - self.clock.monotonic()
            if d.error != ErrorCode.CONCURRENT_TRANSACTIONS or remaining <= 0:
                return d
            pending = await self._decided_again(tid, decide, remaining)

    def _begin_decision(self, tid: str, decide: Callable[[], Decision]) -> asyncio.Future[Decision]:
        """Decide now -- first, and again each time a waiting request is woken (`_decided_again`):
        a partition that went elsewhere meanwhile (the unload wakes its waiters) left no state to
        decide on, and its requests belong to the new coordinator (seed 3501 of the simulation)."""
        if err := self.not_served(tid):
            return _done(Decision(error=err))
        try:
            decision = decide()
        except KafkaError as e:  # no producer id to hand out yet (retriable), nothing changed
            return _done(Decision(error=e.code))
        return self._begin(tid, decision)

    async def _execute(self, tid: str, d: Decision) -> Decision:
        return await asyncio.shield(self._begin(tid, d))

    def _begin(self, tid: str, d: Decision) -> asyncio.Future[Decision]:
        """Write the decision's record (if any), then let it take effect; the future says how it went.

        The record is appended now, before this returns: a request woken by the change it waited
        for (`_decided_again`) appends in the very loop turn of that change, so a follower's fetch
        parked at the leader, woken by the change's own record, takes both records in one round
        (tests/unit/test_txn_replication_rounds.py). What follows the append — the wait until it
        is durable, and its outcome — runs as the coordinator's own task, shielded from the
        request handler: the server cancels a handler whose client went away, and a transition cut
        off between its append and its outcome stayed pending for good — the id answered
        CONCURRENT_TRANSACTIONS to every later InitProducerId and its transaction never timed out
        (the chaos campaign's copier hangs), while the record it had appended could still commit."""
        if not d.writes:
            return _done(d)
        if not self.owns(tid) or not self.machine.current(tid, d):
            # The partition moved (and perhaps came back) between the decision and its write —
            # the reaper decides one id, then waits for the previous id's write: the state the
            # decision was made on is gone, so nothing is written.
            self._notify(tid)
            return _done(Decision(error=ErrorCode.NOT_COORDINATOR))
        try:
            appended = self._append(tid, d)
        except BaseException:  # a bug: the transition must not stay pending
            self.machine.abandon(tid, d)
            self._notify(tid)
            raise
        if isinstance(appended, ErrorCode) or d.record is None or d.record.state not in _COMPLETIONS:
            return self._spawn(self._write(tid, d, appended))
        # A completion (CompleteCommit/CompleteAbort) is acted on once appended, without waiting
        # until it is durable: every later decision on the id writes a record behind it in the
        # same log and waits for that one, which makes the completion durable too; and a
        # completion lost in a crash or a failover is redone by the next coordinator from the
        # PrepareX record it follows (markers resent, which the partitions take again
        # harmlessly). Waiting for it would put one more replication round trip between a commit
        # and the producer's next transaction, which waits for the completion
        # (CONCURRENT_TRANSACTIONS) before it can begin. Acted on in this turn, so that the
        # next transaction's record, appended by the request that waited, joins it in the
        # followers' next fetch. Nor is a sync asked for it: the next record's sync covers it, and
        # one of its own, still running when that record came, made it wait for two in a row.
        return _done(self._take_effect(tid, d, ErrorCode.NONE))

    async def _write(self, tid: str, d: Decision, appended: tuple[Partition, int] | ErrorCode) -> Decision:
        """The rest of `_begin`: wait until the record is durable, then let it take effect."""
        err = ErrorCode.NONE
        if isinstance(appended, ErrorCode):
            err = appended
        else:
            part, end = appended
            try:
                await self._durable(part, end)
            except KafkaError as e:
                log.error("__transaction_state append failed", transactional_id=tid, error=e.code.name,
                          reason=e.message)
                err = _APPEND_ERRORS.get(e.code, e.code)
            except OSError as e:
                log.error("__transaction_state append failed", transactional_id=tid, exc_info=e)
                err = ErrorCode.NOT_COORDINATOR
            except BaseException:  # a bug, or the broker stopping: the transition must not stay pending
                self.machine.abandon(tid, d)
                self._notify(tid)
                raise
        return self._take_effect(tid, d, err)

    def _take_effect(self, tid: str, d: Decision, err: ErrorCode) -> Decision:
        if not self.owns(tid) or not self.machine.current(tid, d):
            # The partition moved (and perhaps came back) while the record was being written: the
            # state this decision was made on is gone, and whoever loads the log now decides what
            # the record means (seed 003's check after appendTransactionToLog).
            self._notify(tid)
            return Decision(error=ErrorCode.NOT_COORDINATOR)
        if err:
            self.machine.abandon(tid, d)
            self._notify(tid)
            return Decision(error=err)
        jobs = self.machine.complete(tid, d)
        for job in jobs:
            if job.commit:
                crash_point("after_prepare")
            self.sender.add(job)
        self._notify(tid)
        return d

    def _append(self, tid: str, d: Decision) -> tuple[Partition, int] | ErrorCode:
        """Append the transition to the id's `__transaction_state` partition: the partition and
        the log end after the record, which must be durable (`_durable`) before the transition
        is acted on; or the error to answer."""
        part = self.topics.partition(TOPIC, self.machine.partition_of(tid))
        if part is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        value = None if d.remove or d.record is None else encode_value(d.record)
        batch = build_batch([Record(0, 0, encode_key(tid), value)])
        try:
            res = part.append(batch, AppendOrigin.COORDINATOR)
        except KafkaError as e:
            log.error("__transaction_state append failed", transactional_id=tid, error=e.code.name, reason=e.message)
            return _APPEND_ERRORS.get(e.code, e.code)
        except OSError as e:
            log.error("__transaction_state append failed", transactional_id=tid, exc_info=e)
            return ErrorCode.NOT_COORDINATOR
        return part, res.last_offset + 1

    @staticmethod
    async def _durable(part: Partition, end_offset: int) -> None:
        """Durable: fsynced on one broker (grouped per loop turn), on the in-sync replicas on a
        cluster."""
        await part.made_durable()  # not acted on (answered, markers sent) before it is on disk
        code = await part.replicated(end_offset, REPLICATION_TIMEOUT_S)  # and on the ISR
        if code:
            raise KafkaError(code, "the transaction state did not reach the in-sync replicas")

    # ---- waiting for an id to change ----------------------------------------------------------
    async def _decided_again(self, tid: str, decide: Callable[[], Decision],
                             timeout: float) -> asyncio.Future[Decision]:
        """Wait until `tid` changes (or `timeout`), then decide again: in `_notify`, in the loop
        turn of the change itself, so that a record the new decision writes is appended in that
        turn (see `_begin`). The outcome of that decision, as a future."""
        fut: asyncio.Future[asyncio.Future[Decision]] = asyncio.get_running_loop().create_future()

        def again() -> None:
            if fut.done():  # cancelled: the request went away before the change
                return
            try:
                fut.set_result(self._begin_decision(tid, decide))
            except Exception as e:  # a bug: the request fails, not the notifier
                fut.set_exception(e)

        self._waiters.setdefault(tid, []).append(again)
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            if fut.done() and not fut.cancelled():
                return fut.result()  # decided again as the time ran out
            return self._begin_decision(tid, decide)
        finally:
            waiters = self._waiters.get(tid)
            if waiters is not None:
                if again in waiters:
                    waiters.remove(again)
                if not waiters:
                    del self._waiters[tid]

    def _notify(self, tid: str) -> None:
        """`tid` changed: the requests waiting for that decide again, now."""
        for again in self._waiters.pop(tid, []):
            again()

    # ---- markers done -> CompleteCommit / CompleteAbort ---------------------------------------
    def _on_markers_done(self, jobs: list[MarkerJob]) -> None:
        for job in jobs:
            self._spawn(self._complete(job))

    async def _complete(self, job: MarkerJob) -> None:
        if job.commit:
            crash_point("before_complete")
        d = self.machine.markers_written(job, self.clock.now_ms())
        if d is None:
            return
        done = await self._execute(job.transactional_id, d)
        if not done.error:
            self.metrics.transactions_ended["commit" if job.commit else "abort"] += 1
        if done.error == ErrorCode.NOT_COORDINATOR:
            return  # the partition moved: its new coordinator resends the markers and completes
        if done.error:
            # The markers are in place; only the completion record is missing. Try again later
            # (the id stays in PrepareX meanwhile, answering CONCURRENT_TRANSACTIONS).
            log.warning("could not write transaction completion, will retry", transactional_id=job.transactional_id,
                        error=ErrorCode(done.error).name)
            await asyncio.sleep(0.5)
            self._spawn(self._complete(job))

    def _spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks[task] = None
        task.add_done_callback(lambda done: self._tasks.pop(done, None))
        return task

    # ---- the reaper ---------------------------------------------------------------------------
    async def _reap_loop(self) -> None:
        interval = self.cfg.transaction_abort_timed_out_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.reap()
            except Exception as e:  # a bug here must not stop future timeouts
                log.error("transaction reaper failed", exc_info=e)

    async def reap(self) -> None:
        """Abort transactions past their timeout; remove transactional ids idle past expiry. Each
        id is decided only once the previous one's write is done (the machine's timers are lazy),
        on the state it has then, and its write is checked against that state again."""
        stale = broken("reaper-recheck")  # issue 23 item 9 taken back: every id decided first
        now = self.clock.now_ms()
        timed_out = self.machine.timed_out(now, self.clock.monotonic_ms(), self.owns)
        for tid, d in list(timed_out) if stale else timed_out:
            log.info("aborting timed-out transaction", transactional_id=tid)
            if not (await self._execute(tid, d)).error:
                self.metrics.transactions_timed_out += 1
        expired = self.machine.expired(now, self.owns)
        for tid, d in list(expired) if stale else expired:
            log.info("removing expired transactional id", transactional_id=tid)
            await self._execute(tid, d)
