"""Batch-atomic commits (`commitMode` `batch-atomic`): a micro-batch's output becomes readable at
read_committed all at once, never in part, through prepared transactions (KIP-939).

Committing one transaction per task, as per-task mode does (exactly_once.py), cannot give that:
a reader sees each task's part as it is committed. Committing the tasks' transactions together
from the driver does not either, on its own: they are still committed one after the other, and in
a partition a committed transaction is readable as soon as no transaction still open began before
it. So per micro-batch B:

1. **The gate.** Before B's tasks run, the driver opens a transaction of its own (`gate_id`, with
   2PC) holding one record in every partition of the sink's topic, and prepares it (`ensure_gate`,
   called where Spark plans each micro-batch's write). While it is open, the last stable offset of
   each partition stays at its record, before anything of B: nothing of B is readable.
2. **The tasks.** Each task writes its part of B and its marker (as in per-task mode) in one 2PC
   transaction under `<prefix>-<queryId>-<task>`, prepares it, and returns the token (`begin`, the
   sink's sends, `PreparedOutput.finish`).
3. **The driver's commit(B)** (`commit_batch`): takes every token's transaction over (InitProducerId
   with KeepPreparedTxn, which fences the task's producer, and shows that the transaction is still
   the one reported), records the decision "B commits" (the committed offset of the consumer group
   `<prefix>-<queryId>-batches`), commits each transaction, waits until their markers are written,
   then aborts the gate: in each partition the LSO moves past all of B at once. It returns when
   B is readable.

**Recovery.** Spark replays B when the driver died before recording B in its commit log. Each task
of the replay initialises with KeepPreparedTxn and reads its marker and the decision
(atomic_rules.py): if B was decided, it hands its prepared transaction to the driver (or has none
left: its part is committed) and writes nothing; if not, it aborts what an earlier attempt left
and writes its part again. The gate left open by the dead driver is kept (it still holds back
whatever part of B was committed), so the replay's commit shows all of B at once. A gate whose
opening was cut short (a record missing in some partition) is aborted and opened again: no task
had run behind it.

**abort(B)** aborts the reported transactions and the gate, unless B was decided: then the next
start of the query completes it.

Costs and limits are in docs/pipeline.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial

from client import (
    Admin,
    KafkaClientError,
    OffsetAndMetadata,
    PreparedTransaction,
    Producer,
    TopicPartition,
)
from protocol.clock import SYSTEM_CLOCK
from protocol.errors import ErrorCode

from . import broker_io
from .atomic_rules import TaskAction, needs_decision, task_action
from .exactly_once import TaskOutcome, TaskOutput, TaskWrite, abort_quietly
from .options import OptionError, SinkOptions

log = logging.getLogger("ketch.pipeline.atomic")

GATE_HEADER = "ketch-gate"  # on the gate's records (aborted: only read_uncommitted readers meet them)
TAKE_OVER_AT_ONCE = 16  # transactions the driver takes over concurrently
MARKERS_TIMEOUT_S = 120.0

Reached = Callable[[str], None]


def _nothing(point: str) -> None:
    pass


class TwoPhaseCommitRefused(OptionError):
    """The broker does not allow prepared transactions (KIP-939)."""


@dataclass(frozen=True)
class TaskReport:
    """What the driver needs from each task's commit message."""

    partition_id: int
    token: PreparedTransaction | None  # None: nothing left to commit (committed before)


def gate_id(sink: SinkOptions) -> str:
    """The gate's transactional id. Spark plans a micro-batch's write without telling the sink
    its query id, so the gate is named after the query's checkpoint location (as given: restart
    the query with the same string)."""
    if not sink.checkpoint:
        raise OptionError("commitMode batch-atomic needs the checkpointLocation option (it names the batch gate)")
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", sink.checkpoint.rstrip("/").rsplit("/", 1)[-1])[:40]
    digest = hashlib.sha256(sink.checkpoint.encode()).hexdigest()[:12]
    return f"{sink.txn_prefix}-gate-{name}-{digest}"


def decision_group(sink: SinkOptions, query_id: str) -> str:
    return f"{sink.txn_prefix}-{query_id}-batches"


def _marker(sink: SinkOptions) -> TopicPartition:
    assert sink.marker_topic is not None
    return TopicPartition(sink.marker_topic, 0)


async def _committed_offset(sink: SinkOptions, group: str) -> int | None:
    """The group's committed offset on the marker partition, not waiting for pending ones: a
    pending one here belongs to a transaction the caller holds (kept) or has just ended."""
    offsets = await broker_io.admin_call(sink, lambda admin: admin.list_group_offsets(group))
    return offsets.get(_marker(sink))


async def decided_batch(sink: SinkOptions, query_id: str) -> int | None:
    """The last micro-batch the driver decided to commit, None if none yet."""
    offset = await _committed_offset(sink, decision_group(sink, query_id))
    return None if offset is None else offset - 1


async def _decide(sink: SinkOptions, query_id: str, batch: int) -> None:
    group = decision_group(sink, query_id)

    async def commit(admin: Admin) -> dict[TopicPartition, KafkaClientError | None]:
        return await admin.alter_group_offsets(group, {_marker(sink): batch + 1})

    errors = await broker_io.admin_call(sink, commit)
    failed = [e for e in errors.values() if e is not None]
    if failed or _marker(sink) not in errors:
        raise failed[0] if failed else RuntimeError(f"the decision for batch {batch} was not recorded")


async def _keeper(sink: SinkOptions, transactional_id: str) -> tuple[Producer, PreparedTransaction | None]:
    """A started 2PC producer for `transactional_id` that has kept whatever transaction was open
    (fencing every earlier instance), and that transaction's token."""
    producer = Producer(sink.bootstrap, transactional_id=transactional_id, enable_2pc=True,
                        linger_ms=sink.linger_ms, batch_size=sink.batch_size, security=sink.security)
    try:
        await producer.start()
        try:
            return producer, await producer.init_transactions(keep_prepared=True)
        except KafkaClientError as e:
            if e.code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                raise TwoPhaseCommitRefused(
                    f"commitMode batch-atomic needs prepared transactions, which the broker at {sink.bootstrap} "
                    "refuses: set transaction_two_phase_commit_enable (Kafka: transaction.two.phase.commit.enable) "
                    "on the brokers, or use commitMode per-task") from e
            if e.code != ErrorCode.INVALID_TXN_STATE:
                raise
        # A transaction without 2PC is open (a per-task attempt's, the query switching modes):
        # it cannot be kept and was never part of a decision. A plain initialisation aborts it.
        await producer.close()
        producer = Producer(sink.bootstrap, transactional_id=transactional_id, enable_2pc=True,
                            linger_ms=sink.linger_ms, batch_size=sink.batch_size)
        await producer.start()
        await producer.init_transactions()
        return producer, None
    except BaseException:
        with contextlib.suppress(Exception):
            await producer.close()
        raise


# ---- the gate ------------------------------------------------------------------------------------

async def _partitions(sink: SinkOptions) -> list[TopicPartition]:
    assert sink.topic is not None
    described = await broker_io.describe_topics(sink, [sink.topic])
    return sorted(TopicPartition(sink.topic, p.partition) for p in described[sink.topic].partitions)


async def _gate_holds(sink: SinkOptions, gate: PreparedTransaction, tps: list[TopicPartition]) -> bool:
    """Whether the gate's transaction has its record in every partition (its opening finished)."""
    producers = await broker_io.admin_call(sink, lambda admin: admin.describe_producers_of(tps))
    return all(any(s.producer_id == gate.producer_id and s.current_txn_start_offset >= 0 for s in producers[tp])
               for tp in tps)


async def ensure_gate(sink: SinkOptions) -> None:
    """Open the gate unless it is open (idempotent): before each micro-batch's tasks run."""
    tps = await _partitions(sink)
    producer, kept = await _keeper(sink, gate_id(sink))
    try:
        if kept is not None:
            if await _gate_holds(sink, kept, tps):
                return
            log.warning("batch gate %s was not open in every partition (its opening was cut short): opened anew",
                        kept.transactional_id)
            await producer.complete_transaction(kept, commit=False)
        await producer.begin_transaction()
        for tp in tps:
            await producer.send(tp.topic, b"", partition=tp.partition, headers=[(GATE_HEADER, b"")])
        await producer.prepare_transaction()
    finally:
        await producer.close()


async def end_gate(sink: SinkOptions) -> None:
    """Abort the gate (if open), and return once its markers are written: the partitions' last
    stable offsets have moved past it."""
    tid = gate_id(sink)
    producer, kept = await _keeper(sink, tid)
    try:
        if kept is None:
            log.warning("no batch gate was open (%s): the micro-batch was not held back until its commit", tid)
            return
        await producer.complete_transaction(kept, commit=False)
    finally:
        await producer.close()
    await _markers_written(sink, [tid])


# ---- the tasks -----------------------------------------------------------------------------------

class PreparedOutput(TaskOutput):
    """A task's 2PC transaction, marker included: `finish()` prepares it and hands out its token."""

    async def finish(self) -> TaskOutcome:
        try:
            token = await self.producer.prepare_transaction()
        except BaseException:
            await self.fail()
            raise
        await self.producer.close()
        return TaskOutcome(rows=self.rows, skipped=False, token=token)

    async def fail(self) -> None:
        await abort_quietly(self.producer)
        with contextlib.suppress(Exception):
            await self.producer.close()


async def begin(sink: SinkOptions, who: TaskWrite) -> PreparedOutput | TaskOutcome:
    """A task attempt of a batch-atomic micro-batch: its open transaction with the marker in it,
    or, on a replay, what it found (atomic_rules.task_action)."""
    producer, kept = await _keeper(sink, who.transactional_id(sink.txn_prefix))
    try:
        marker = await _committed_offset(sink, who.marker_group(sink.txn_prefix))
        decided = await decided_batch(sink, who.run_id)
        action = task_action(who.batch_id, committed=None if marker is None else marker - 1, decided=decided,
                             kept=kept is not None)
        if action is TaskAction.LOST:
            raise RuntimeError(
                f"batch {who.batch_id} of query {who.run_id} was decided, but task {who.partition_id}'s prepared "
                "transaction is gone and its part is not committed: something outside the sink ended it")
        if action in (TaskAction.SKIP, TaskAction.HAND_OVER):
            await producer.close()
            return TaskOutcome(rows=0, skipped=True, token=kept if action is TaskAction.HAND_OVER else None)
        if action is TaskAction.ABORT_AND_WRITE:
            assert kept is not None
            await producer.complete_transaction(kept, commit=False)
        await producer.begin_transaction()
        meta = json.dumps({"batch": who.batch_id})
        await producer.send_offsets_to_transaction({_marker(sink): OffsetAndMetadata(who.batch_id + 1, meta)},
                                                   who.marker_group(sink.txn_prefix))
        return PreparedOutput(producer, who.batch_id)
    except BaseException:
        await abort_quietly(producer)
        with contextlib.suppress(Exception):
            await producer.close()
        raise


# ---- the driver ----------------------------------------------------------------------------------

async def _take_over(sink: SinkOptions, tokens: Sequence[PreparedTransaction]) -> dict[str, Producer]:
    """A keeper per token, each holding exactly the token's transaction; raises (and closes them
    all) if one is not there any more."""
    limit = asyncio.Semaphore(TAKE_OVER_AT_ONCE)
    keepers: dict[str, Producer] = {}

    async def one(token: PreparedTransaction) -> None:
        async with limit:
            producer, kept = await _keeper(sink, token.transactional_id)
            keepers[token.transactional_id] = producer
            if kept != token:
                raise RuntimeError(f"{token.transactional_id}: the prepared transaction {token} is not open "
                                   f"(found {kept}); the micro-batch is not committed")

    results = await asyncio.gather(*(one(t) for t in tokens), return_exceptions=True)
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        await _close_all(keepers.values())
        raise failed[0]
    return keepers


async def _close_all(producers: Iterable[Producer]) -> None:
    for p in producers:
        with contextlib.suppress(Exception):
            await p.close()


async def _completing(admin: Admin, transactional_id: str) -> bool:
    try:
        described = await admin.describe_transactions([transactional_id])
    except KafkaClientError as e:
        if e.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:  # never had a transaction: nothing to wait for
            return False
        raise
    return described[transactional_id].state in ("PrepareCommit", "PrepareAbort")


async def _markers_written(sink: SinkOptions, transactional_ids: Iterable[str]) -> None:
    """Wait until no transaction of these ids is still having its markers written."""
    waiting = list(transactional_ids)
    deadline = SYSTEM_CLOCK.monotonic() + MARKERS_TIMEOUT_S
    while waiting:
        waiting = [t for t in waiting
                   if await broker_io.admin_call(sink, partial(_completing, transactional_id=t))]
        if waiting:
            if SYSTEM_CLOCK.monotonic() > deadline:
                raise TimeoutError(f"transaction markers still being written after {MARKERS_TIMEOUT_S}s: {waiting}")
            await asyncio.sleep(0.01)


async def commit_batch(sink: SinkOptions, query_id: str, batch: int, tasks: Sequence[TaskReport],
                       reached: Reached = _nothing) -> None:
    """The driver's commit of a batch-atomic micro-batch (steps in the module's docstring).
    `reached` is told each step done ("taken over", "decided", "completed" after each
    transaction, "markers written", "gate ended"): tests stop the driver there."""
    tokens = [t.token for t in tasks if t.token is not None]
    decided = await decided_batch(sink, query_id)
    keepers = await _take_over(sink, tokens)
    try:
        reached("taken over")
        if needs_decision(decided, batch):
            await _decide(sink, query_id, batch)
        reached("decided")
        for token in tokens:
            await keepers[token.transactional_id].complete_transaction(token, commit=True)
            reached("completed")
    finally:
        await _close_all(keepers.values())
    prefix = sink.txn_prefix
    await _markers_written(sink, [TaskWrite(query_id, batch, t.partition_id).transactional_id(prefix) for t in tasks])
    reached("markers written")
    await end_gate(sink)
    reached("gate ended")


async def abort_batch(sink: SinkOptions, query_id: str | None, batch: int,
                      tokens: Sequence[PreparedTransaction]) -> None:
    """The driver's abort: the reported transactions and the gate, unless the batch was decided
    (then some of it may be committed, and the restart completes the rest)."""
    if query_id is not None and not needs_decision(await decided_batch(sink, query_id), batch):
        log.warning("micro-batch %d was decided: it is completed when the query starts again", batch)
        return
    keepers: dict[str, Producer] = {}
    try:
        for token in tokens:
            producer, kept = await _keeper(sink, token.transactional_id)
            keepers[token.transactional_id] = producer
            if kept is not None:
                await producer.complete_transaction(kept, commit=False)
    finally:
        await _close_all(keepers.values())
    await _markers_written(sink, [t.transactional_id for t in tokens])
    await end_gate(sink)
