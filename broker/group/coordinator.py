"""The asyncio side of the group coordinator: futures, timers, the `__consumer_offsets` log.

All decisions are the state machine's (state.py). This wrapper
* parks JoinGroup/SyncGroup requests as futures keyed by a token until the machine replies,
* writes the records the machine asks for through Partition.append *before* any reply goes out,
  so nothing is acknowledged that a crash could lose from the log,
* sleeps until the machine's next deadline (session, rebalance, initial delay, retention),
* reads `__consumer_offsets` back at start, one partition after another, while the groups of
  partitions not yet read answer COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import time
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import structlog

from protocol.clock import Clock
from protocol.errors import ErrorCode, KafkaError
from protocol.records import Record, build_batch

from ..partition import AppendOrigin, Isolation, Partition, VerificationGuard
from .assignors import TopicMeta
from .consumer import ConsumerGroupSummary, ConsumerHeartbeat, HeartbeatResult
from .loading import Marker, Replayed, replayed
from .model import (
    CommitPlan,
    Effects,
    FetchedOffset,
    GroupSummary,
    JoinRequest,
    JoinResult,
    Now,
    OffsetCommitIn,
    SyncRequest,
    SyncResult,
    TopicPartition,
    Write,
)
from .records import RecordFormatError
from .share import ShareGroupSummary, ShareHeartbeat
from .state import GroupStateMachine, Settings

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..topics import TopicTable

log = structlog.get_logger()
T = TypeVar("T")

OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's defaults for the offsets topic: compacted, 100 MiB segments (small enough to compact).
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}
COMMIT_TIMEOUT_S = 5.0  # Kafka's offsets.commit.timeout.ms: the in-sync replicas must have a commit by then


def settings_from(cfg: BrokerConfig) -> Settings:
    return Settings(
        num_partitions=cfg.offsets_topic_num_partitions,
        initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms,
        min_session_timeout_ms=cfg.group_min_session_timeout_ms,
        max_session_timeout_ms=cfg.group_max_session_timeout_ms,
        offsets_retention_ms=cfg.offsets_retention_minutes * 60 * 1000,
        offsets_retention_check_interval_ms=cfg.offsets_retention_check_interval_ms,
        offset_metadata_max_bytes=cfg.offset_metadata_max_bytes,
        max_group_size=cfg.group_max_size,
        consumer_session_timeout_ms=cfg.group_consumer_session_timeout_ms,
        consumer_heartbeat_interval_ms=cfg.group_consumer_heartbeat_interval_ms,
        consumer_assignors=tuple(a.strip() for a in cfg.group_consumer_assignors.split(",") if a.strip()),
        consumer_migration_policy=cfg.group_consumer_migration_policy,
        share_session_timeout_ms=cfg.group_share_session_timeout_ms,
        share_heartbeat_interval_ms=cfg.group_share_heartbeat_interval_ms,
    )


class GroupCoordinator:
    def __init__(self, cfg: BrokerConfig, topics: TopicTable, clock: Clock,
                 lease_held: Callable[[], bool] = lambda: True) -> None:
        self.cfg = cfg
        self.topics = topics
        self.clock = clock
        self.sm = GroupStateMachine(settings_from(cfg), topics.exists, lease_held=lease_held, topics=self._topic_view,
                                   opening=self._opening)
        self._waiters: dict[int, asyncio.Future[JoinResult | SyncResult]] = {}
        self._tokens = itertools.count(1)
        self._wake = asyncio.Event()
        self._timer_task: asyncio.Task[None] | None = None
        self._load_task: asyncio.Task[None] | None = None
        self._loads: dict[asyncio.Task[None], None] = {}  # partitions whose leadership came here later
        self._commits: dict[asyncio.Task[dict[TopicPartition, int]], None] = {}  # see _commit_and_apply

    def _opening(self, index: int) -> bool:
        """The metadata names this broker the leader of `__consumer_offsets`-`index` and its log is
        not open here yet: its groups are about to load."""
        info = self.topics.image.topics.get(OFFSETS_TOPIC)
        if info is None or not 0 <= index < len(info.partitions) or info.partitions[index].leader != self.cfg.node_id:
            return False
        t = self.topics.get(OFFSETS_TOPIC)
        return t is None or index not in t.local

    def _topic_view(self) -> dict[str, TopicMeta]:
        """The cluster's topics as KIP-848 assignments name them: id and partition count."""
        return {name: (info.topic_id, len(info.partitions)) for name, info in self.topics.image.topics.items()}

    # ---- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Begin serving: if the offsets topic exists its partitions load in the background."""
        loop = asyncio.get_running_loop()
        topic = self.topics.get(OFFSETS_TOPIC)
        if topic is not None:
            self._use_topic_partition_count()
            led = [(p, p.leader_epoch) for p in topic.partitions if p.is_leader]
            for p, epoch in led:
                self.sm.begin_loading(p.index, epoch)
            self._load_task = loop.create_task(self._load(led))
        self.topics.listeners.append(self._on_partition)
        self._timer_task = loop.create_task(self._timer_loop())

    def _on_partition(self, topic: str, partition: Partition, leads: bool) -> None:
        """Leadership of a `__consumer_offsets` partition came here (load its groups in the
        background; COORDINATOR_LOAD_IN_PROGRESS meanwhile) or went elsewhere (forget them). A
        new election while a load is still running starts the load over under its epoch."""
        if topic != OFFSETS_TOPIC:
            return
        self._use_topic_partition_count()
        i = partition.index
        mine = i in self.sm.owned or i in self.sm.loading
        epoch = partition.leader_epoch
        if leads and i not in self.sm.owned and not self.sm.loads(i, epoch):
            self.sm.begin_loading(i, epoch)
            task = asyncio.get_running_loop().create_task(self._load([(partition, epoch)], wait_for_isr=True))
            self._loads[task] = None
            task.add_done_callback(lambda done: self._loads.pop(done, None))
        elif not leads and mine:
            log.info("consumer groups unloaded: the partition is led elsewhere", partition=i)
            self.sm.unload_partition(i)
            self._apply(None)

    async def stop(self) -> None:
        self.sm.active = False
        for t in (self._timer_task, self._load_task, *self._loads, *self._commits):
            if t is not None:
                t.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await t
        for fut in self._waiters.values():
            fut.cancel()
        self._waiters.clear()

    async def ensure_topic(self) -> None:
        """Create `__consumer_offsets` the first time a group needs it (every handler of a group
        API calls this first); the partitions led here are owned as the image brings them."""
        await self.topics.ensure_internal(OFFSETS_TOPIC, self.cfg.offsets_topic_num_partitions,
                                          self.cfg.offsets_topic_replication_factor, OFFSETS_TOPIC_CONFIGS)

    # ---- loading -----------------------------------------------------------------------------
    def is_loading(self, partition: int) -> bool:
        """True while that `__consumer_offsets` partition is still being read back: a transaction
        marker written meanwhile would be past the loader's end and leave offsets pending."""
        return partition in self.sm.loading

    async def _load(self, partitions: list[tuple[Partition, int]], wait_for_isr: bool = False) -> None:
        """Replay partitions, each for the election of its coordinator epoch, up to their high
        watermark. A partition whose leadership just came here first waits, however long it takes,
        until everything its log held at the election is committed (caught_up_as_leader): loaded
        earlier, it would miss offsets its previous coordinator acknowledged; its groups answer
        COORDINATOR_LOAD_IN_PROGRESS meanwhile. A load superseded by a newer election, or whose
        leadership went, stops where it is (`loads`)."""
        started = time.perf_counter()  # how long the load took: our own work, not a timeout
        records = 0
        for p, epoch in partitions:
            if wait_for_isr and not await p.caught_up_as_leader():
                continue  # led elsewhere (unloaded) or elected again (that election loads it)
            pos = p.log_start_offset
            while self.sm.loads(p.index, epoch):
                r = p.read(pos, self.cfg.offsets_load_buffer_size, Isolation.READ_UNCOMMITTED)  # up to the HW
                if r.error or not r.records:
                    break
                # Decoded in a worker thread (from a copy: the log may change meanwhile), applied
                # here: a large partition's records take seconds of Python, which on the loop would
                # stall every request and heartbeat of the broker, as the transaction log's load did.
                chunk = await asyncio.to_thread(replayed, bytes(r.records), pos)
                if not self.sm.loads(p.index, epoch):
                    break  # led elsewhere, or elected again, while the chunk was decoded
                records += self._replay(p.index, chunk)
                pos = r.next_offset
            if self.sm.loads(p.index, epoch):
                self.sm.finish_loading(p.index, Now.of(self.clock))
                self._apply(None)
        log.info("consumer groups loaded", groups=len(self.sm.groups), records=records,
                 seconds=round(time.perf_counter() - started, 3))

    def _replay(self, partition: int, chunk: list[Replayed]) -> int:
        records = 0
        for item in chunk:
            if isinstance(item, Marker):
                self.sm.load_marker(partition, item.producer_id, item.commit)
                continue
            try:
                self.sm.load_record(partition, item.key, item.value, item.offset, item.producer_id)
                records += 1
            except RecordFormatError as e:
                log.warning("skipping unreadable record in " + OFFSETS_TOPIC, partition=partition,
                            offset=item.offset, error=str(e))
        return records

    # ---- timers and effects ------------------------------------------------------------------
    async def _timer_loop(self) -> None:
        # Ends when stop() clears `active`, not only by being cancelled: on Python 3.11 a
        # cancellation that comes in the turn the wake event fires is lost by asyncio.wait_for.
        while self.sm.active:
            self._wake.clear()
            deadline = self.sm.next_deadline()
            if deadline is None or deadline > self.clock.monotonic_ms():
                timeout = None if deadline is None else (deadline - self.clock.monotonic_ms()) / 1000
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
            try:
                self.sm.tick(Now.of(self.clock))
                self._apply(None)
            except Exception as e:  # a bug must not stop every group's timers for good
                log.error("group coordinator timer failed", exc_info=e)

    def _apply(self, result: T) -> T:
        """Write first, then answer: a reply never promises what the log does not hold. Returns
        `result`, the answer of the event these effects come from."""
        fx = self.sm.drain()
        if fx.writes:
            self._write(fx.writes)
        self._deliver(fx)
        return result

    def _deliver(self, fx: Effects) -> None:
        for token, reply in fx.replies:
            fut = self._waiters.pop(token, None)
            if fut is not None and not fut.done():
                fut.set_result(reply)
        self._wake.set()

    def _write(self, writes: list[Write], *, producer_id: int = -1, producer_epoch: int = -1,
               guard: VerificationGuard | None = None
               ) -> tuple[int, list[tuple[Partition, int, asyncio.Future[None] | None]]]:
        """Append the records, one batch per partition: the first offset of the last batch, and
        each partition written with the offset its batch ends before and the flush its flush
        policy asked for (if any). A transaction's offsets carry the `guard` of their KIP-890
        check (raises INVALID_TXN_STATE if the transaction's marker landed since: the offsets are then
        refused TRANSACTION_ABORTABLE, the transaction's end and not the producer's)."""
        by_partition: dict[int, list[Write]] = defaultdict(list)
        for w in writes:
            by_partition[w.partition].append(w)
        first = -1
        written = []
        for index, ws in by_partition.items():
            partition = self.topics.partition(OFFSETS_TOPIC, index)
            if partition is None:
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} partition {index} missing")
            batch = build_batch((Record(i, 0, w.key, w.value) for i, w in enumerate(ws)),
                                producer_id=producer_id, producer_epoch=producer_epoch,
                                transactional=producer_id >= 0)
            res = partition.append(batch, AppendOrigin.COORDINATOR, guard=guard)
            first = res.first_offset
            written.append((partition, res.last_offset + 1, partition.flush_wait))
        return first, written

    async def _commit(self, plan: CommitPlan, guard: VerificationGuard | None = None) -> dict[TopicPartition, int]:
        """Offsets are answered (and become visible) once the in-sync replicas have them, as
        Kafka's coordinator appends with acks=all: a commit acknowledged before a leader's crash
        must be there on the next leader."""
        if not plan.writes:
            return plan.errors
        transactional = plan.producer_id >= 0
        appended = False
        try:
            first, written = self._write(plan.writes, producer_id=plan.producer_id, producer_epoch=plan.producer_epoch,
                                         guard=guard)
            appended = True
            if transactional:
                # Pending from the moment they are in the log, in the same loop turn: a marker of
                # the transaction (an abort for a fenced or timed-out producer) can land while the
                # replicas catch up, and must find them — registered afterwards they would wait
                # for a marker that already passed, and require_stable fetches would never settle.
                self.sm.offsets_written(plan, first)
            for partition, end, flush in written:
                if flush is not None:
                    await flush  # flush_messages=1: answered once on disk, as a produce is
                code = await partition.replicated(end, COMMIT_TIMEOUT_S)
                if code:
                    raise KafkaError(code, "offsets not replicated")
        except Exception as e:
            if isinstance(e, KafkaError):
                log.warning("writing offsets failed", group=plan.group_id, error=e.code.name)
                fail = {ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
                        ErrorCode.INVALID_TXN_STATE: ErrorCode.TRANSACTION_ABORTABLE}.get(
                    e.code, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            else:
                log.error("writing offsets failed", group=plan.group_id, exc_info=e)
                fail = ErrorCode.COORDINATOR_NOT_AVAILABLE
            if transactional and appended:
                self.sm.txn_offsets_failed(plan)
            return {tp: err or fail for tp, err in plan.errors.items()}
        if not transactional:
            self.sm.offsets_written(plan, first)
        return plan.errors

    # ---- the APIs ----------------------------------------------------------------------------
    async def join(self, req: JoinRequest) -> JoinResult:
        result = await self._parked(lambda token, now: self.sm.join_group(token, req, now))
        assert isinstance(result, JoinResult)
        return result

    async def sync(self, req: SyncRequest) -> SyncResult:
        result = await self._parked(lambda token, now: self.sm.sync_group(token, req, now))
        assert isinstance(result, SyncResult)
        return result

    async def _parked(self, event: Callable[[int, Now], None]) -> JoinResult | SyncResult:
        """Feed an event whose answer may come later (a JoinGroup, a SyncGroup): the machine replies
        to its token when it can."""
        await self.ensure_topic()
        token = next(self._tokens)
        fut: asyncio.Future[JoinResult | SyncResult] = asyncio.get_running_loop().create_future()
        self._waiters[token] = fut
        event(token, Now.of(self.clock))
        self._apply(None)
        try:
            return await fut
        finally:
            self._waiters.pop(token, None)

    async def consumer_heartbeat(self, req: ConsumerHeartbeat) -> HeartbeatResult:
        """A KIP-848 heartbeat is answered once the records it caused are on the in-sync replicas,
        as Kafka's coordinator answers: a member must not act on an epoch or an assignment that a
        coordinator move could take back."""
        await self.ensure_topic()
        return await self._replicated(req.group_id, self.sm.consumer_heartbeat(req, Now.of(self.clock)))

    async def share_heartbeat(self, req: ShareHeartbeat) -> HeartbeatResult:
        """A KIP-932 heartbeat, answered the same way: once its records are on the in-sync replicas."""
        await self.ensure_topic()
        return await self._replicated(req.group_id, self.sm.share_heartbeat(req, Now.of(self.clock)))

    def describe_share_group(self, group_id: str) -> tuple[int, ShareGroupSummary | None]:
        return self.sm.describe_share_group(group_id)

    async def _replicated(self, group_id: str, result: HeartbeatResult) -> HeartbeatResult:
        """Write the records the heartbeat caused, and answer `result` once they are replicated."""
        fx = self.sm.drain()
        try:
            _, written = self._write(fx.writes) if fx.writes else (-1, [])
        except KafkaError as e:
            log.warning("writing a group's records failed", group=group_id, error=e.code.name)
            written, result = [], HeartbeatResult(ErrorCode.NOT_COORDINATOR if e.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
                                                  else ErrorCode.COORDINATOR_NOT_AVAILABLE)
        finally:
            fx.writes = []
            self._deliver(fx)
        for partition, end, flush in written:
            if flush is not None:
                await flush
            code = await partition.replicated(end, COMMIT_TIMEOUT_S)
            if code:
                log.warning("a group's records were not replicated", group=group_id, error=code)
                return HeartbeatResult(ErrorCode.NOT_COORDINATOR)
        return result

    def describe_consumer_group(self, group_id: str) -> tuple[int, ConsumerGroupSummary | None]:
        return self.sm.describe_consumer_group(group_id)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int) -> int:
        return self._apply(self.sm.heartbeat(group_id, member_id, group_instance_id, generation, Now.of(self.clock)))

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        return self._apply(self.sm.leave_group(group_id, members, Now.of(self.clock)))

    async def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int,
                       offsets: dict[TopicPartition, OffsetCommitIn],
                       retention_ms: int = -1, api_version: int = 9) -> dict[TopicPartition, int]:
        plan = self.sm.commit_offsets(group_id, member_id, group_instance_id, generation, offsets, Now.of(self.clock),
                                      retention_ms, api_version)
        return await self._commit_and_apply(plan)

    def _commit_and_apply(self, plan: CommitPlan,
                          guard: VerificationGuard | None = None) -> asyncio.Future[dict[TopicPartition, int]]:
        """Commit `plan` as the coordinator's own task, shielded from the request handler: the
        server cancels a handler whose client went away, and offsets appended but never recorded
        as written (a transaction's offsets above all, which its marker then completes) would be
        in the log yet missing from what OffsetFetch answers until the partition is loaded again."""
        async def run() -> dict[TopicPartition, int]:
            return self._apply(await self._commit(plan, guard))

        task = asyncio.get_running_loop().create_task(run())
        self._commits[task] = None
        task.add_done_callback(lambda done: self._commits.pop(done, None))
        return asyncio.shield(task)

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool,
                      member_id: str | None = None, member_epoch: int = -1) -> tuple[int, list[FetchedOffset]]:
        return self.sm.fetch_offsets(group_id, partitions, require_stable, member_id, member_epoch)

    def describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        return self.sm.describe_group(group_id)

    def list_groups(self, states: list[str] | None,
                    types: list[str] | None) -> tuple[int, list[tuple[str, str, str, str]]]:
        return self.sm.list_groups(states, types)

    def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        return self._apply(self.sm.delete_groups(group_ids, Now.of(self.clock)))

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> tuple[int, dict[TopicPartition, int]]:
        return self._apply(self.sm.delete_offsets(group_id, partitions))

    # ---- the transactions' hooks (TxnOffsetCommit and the commit/abort markers) --------------
    def start_verification(self, group_id: str, producer_id: int) -> VerificationGuard | None:
        """The guard a transaction's offsets for `group_id` must still hold when they are appended,
        taken before the transaction coordinator is asked whether the group's partition is in the
        producer's transaction (Kafka's VerificationGuard, as for a produce): a marker that lands in
        between discards it, and the late append is refused instead of opening a transaction in
        `__consumer_offsets` that no marker will ever end. None if the partition is not here."""
        partition = self.topics.partition(OFFSETS_TOPIC, self.partition_for(group_id))
        return None if partition is None else partition.start_verification(producer_id)

    async def prepare_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                            offsets: dict[TopicPartition, OffsetCommitIn], *, member_id: str = "",
                            group_instance_id: str | None = None, generation: int = -1,
                            guard: VerificationGuard | None = None) -> dict[TopicPartition, int]:
        """Write the offsets as a transactional batch of `producer_id` holding `guard` (from
        start_verification); they stay pending (and OffsetFetch with require_stable answers
        UNSTABLE_OFFSET_COMMIT for them) until the transaction's marker is written to the group's
        partition, replicated, and complete_txn is called."""
        plan = self.sm.prepare_txn_offsets(group_id, producer_id, producer_epoch, offsets, Now.of(self.clock),
                                           member_id=member_id, group_instance_id=group_instance_id,
                                           generation=generation)
        return await self._commit_and_apply(plan, guard)

    def complete_txn(self, producer_id: int, commit: bool, partition: int) -> None:
        self.sm.complete_txn(producer_id, commit, partition)

    def partition_for(self, group_id: str) -> int:
        self._use_topic_partition_count()
        return self.sm.partition_for(group_id)

    def _use_topic_partition_count(self) -> None:
        """Place groups by the partitions `__consumer_offsets` has, not by the configured count:
        a topic created under another configuration keeps its groups' records where its own count
        put them (as the transaction coordinator does for `__transaction_state`)."""
        topic = self.topics.get(OFFSETS_TOPIC)
        table = self.sm.table
        if topic is not None and topic.num_partitions and topic.num_partitions != table.settings.num_partitions:
            log.warning(OFFSETS_TOPIC + " has a different partition count than configured; using it",
                        partitions=topic.num_partitions, configured=table.settings.num_partitions)
            table.settings = dataclasses.replace(table.settings, num_partitions=topic.num_partitions)
