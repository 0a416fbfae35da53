"""One Spark task's output, committed to Ketch exactly once: the heart of the sink's guarantee.

Spark may run a task's write again (a task attempt failed, an executor was lost, the driver
crashed and the query restarted from its checkpoint and replays the last micro-batch), and a
failed attempt may have left output behind. The protocol, per task:

1. A transactional producer whose id is derived from the *run* (the streaming query's id, stable
   across restarts from the same checkpoint) and the task's partition id. `init_transactions()`
   fences every earlier attempt of the same task (it can no longer produce or commit) and makes
   the coordinator abort whatever such an attempt left open.
2. Read the task's *marker*: a consumer-group offset (group derived from the same id) that says
   which batch this task last committed. Read with require_stable (read_committed), so an
   offset still pending in a transaction is waited for, never missed.
3. If the marker says this batch is already committed, write nothing: a replay.
4. Otherwise, in one transaction: the marker advanced to this batch (TxnOffsetCommit, sent first)
   and every record of the task. Both become visible together or not at all.

So for every (batch, task) either all records and the marker are committed once, or nothing is;
a replay sees the marker and skips.

**Reuse.** A Python worker keeps the producer (and the consumer that reads the marker) of a task
for that task's next micro-batch (pipeline/runtime.py), instead of paying for a new producer and
init_transactions every batch. A kept producer skips step 1, which stays sound because:

* it is kept only after a transaction it committed (or a replay it skipped): any failure drops
  it, so it never holds an open transaction or a doubtful state when taken again;
* while no other producer has initialised the same id since its own init_transactions, nobody
  else can have written for this task: the marker it reads is the whole truth;
* if another one has (another attempt of the task, on another worker or after a restart), the
  kept producer is fenced, and its first request to the coordinator says so: AddOffsetsToTxn, sent
  before any record is taken from Spark. Then it is dropped and the task starts over at step 1
  with a new producer, whose init_transactions fences that other attempt in turn. Reading the
  marker of a kept producer is bounded (`KEPT_MARKER_WAIT_S`): a marker held pending by such an
  attempt's open transaction is cleared by that same fresh start.

The limits are in docs/pipeline.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from client import (
    Consumer,
    KafkaClientError,
    OffsetAndMetadata,
    PreparedTransaction,
    Producer,
    TopicPartition,
)
from client.structs import EncodedRecords
from client.transactions import ProducerTxnState

from .options import SinkOptions
from .records_out import OutRecord
from .runtime import ClientCache

# How long a kept producer's marker read may wait on a pending marker before the task starts
# over with a new producer (whose init_transactions ends whatever holds the marker).
KEPT_MARKER_WAIT_S = 5.0


@dataclass(frozen=True)
class TaskWrite:
    """Who is writing: the run (query id or batch-job id), the batch, the task's partition."""

    run_id: str
    batch_id: int
    partition_id: int

    def transactional_id(self, prefix: str) -> str:
        return f"{prefix}-{self.run_id}-{self.partition_id}"

    def marker_group(self, prefix: str) -> str:
        # One group per task: two tasks committing the same partition of one group would overwrite
        # each other's markers.
        return f"{prefix}-{self.run_id}-{self.partition_id}"


@dataclass(frozen=True)
class TaskOutcome:
    rows: int
    skipped: bool  # the batch had been committed (or, batch-atomic, prepared) by an earlier attempt: nothing written
    token: PreparedTransaction | None = None  # batch-atomic: the prepared transaction, for the driver to commit


@dataclass
class TaskClients:
    """A task's transactional producer (initialised) and the consumer that reads its marker, and
    the last batch that producer committed or found committed."""

    producer: Producer
    marker_reader: Consumer
    last_batch: int = -2


def _new_producer(sink: SinkOptions, who: TaskWrite) -> Producer:
    return Producer(sink.bootstrap, transactional_id=who.transactional_id(sink.txn_prefix),
                    transaction_timeout_ms=sink.transaction_timeout_ms, linger_ms=sink.linger_ms,
                    batch_size=sink.batch_size, security=sink.security)


async def _init(producer: Producer) -> Producer:
    try:
        await producer.start()
        await producer.init_transactions()
    except BaseException:
        with contextlib.suppress(Exception):
            await producer.close()
        raise
    return producer


async def open_clients(sink: SinkOptions, who: TaskWrite) -> TaskClients:
    reader = Consumer(sink.bootstrap, group_id=who.marker_group(sink.txn_prefix), isolation_level="read_committed",
                      enable_auto_commit=False, security=sink.security)
    await reader.start()
    try:
        return TaskClients(await _init(_new_producer(sink, who)), reader)
    except BaseException:
        with contextlib.suppress(Exception):
            await reader.close()
        raise


async def close_clients(clients: TaskClients) -> None:
    with contextlib.suppress(Exception):
        await clients.producer.close()
    with contextlib.suppress(Exception):
        await clients.marker_reader.close()


def _key(sink: SinkOptions, who: TaskWrite) -> Hashable:
    return (sink.bootstrap, sink.security, who.transactional_id(sink.txn_prefix), sink.transaction_timeout_ms,
            sink.linger_ms, sink.batch_size)


async def committed_batch(reader: Consumer, marker: TopicPartition) -> int | None:
    """The last batch id this task committed, None if none yet."""
    offset = await reader.committed(marker)
    return None if offset is None else offset - 1


class TaskOutput:
    """A task's open transaction, the marker for its batch already in it: the sink sends the
    task's records into it, then `finish()`es it (or `fail()`s it), as its commit mode says."""

    def __init__(self, producer: Producer, batch_id: int) -> None:
        self.producer = producer
        self.batch_id = batch_id
        self.rows = 0

    async def send_records(self, records: Iterable[OutRecord]) -> None:
        send = self.producer.send
        for r in records:
            await send(r.topic, r.value, key=r.key, partition=r.partition, headers=r.headers or None)
            self.rows += 1

    async def send_runs(self, runs: Iterable[tuple[str, int, EncodedRecords]]) -> None:
        send = self.producer.send_batch
        for topic, partition, run in runs:
            await send(topic, partition, run)
            self.rows += run.record_count

    async def partitions(self, topic: str) -> int:
        return len(await self.producer.partitions_for(topic))

    async def finish(self) -> TaskOutcome:
        raise NotImplementedError

    async def fail(self) -> None:
        raise NotImplementedError


class TaskTransaction(TaskOutput):
    """Per-task mode: the task commits its transaction itself."""

    def __init__(self, clients: TaskClients, batch_id: int, key: Hashable,
                 cache: ClientCache[TaskClients] | None) -> None:
        super().__init__(clients.producer, batch_id)
        self.clients = clients
        self._key = key
        self._cache = cache

    async def finish(self) -> TaskOutcome:
        return await self.commit()

    async def commit(self) -> TaskOutcome:
        try:
            await self.producer.commit_transaction()
        except BaseException:
            await self.fail()
            raise
        self.clients.last_batch = self.batch_id
        await _release(self.clients, self._key, self._cache)
        return TaskOutcome(rows=self.rows, skipped=False)

    async def fail(self) -> None:
        """Abort what can be aborted and drop the clients: they are never reused after a failure."""
        await abort_quietly(self.producer)
        await close_clients(self.clients)


async def abort_quietly(producer: Producer) -> None:
    if producer.transaction_state not in (ProducerTxnState.FATAL_ERROR, ProducerTxnState.READY, None):
        with contextlib.suppress(Exception):
            await asyncio.wait_for(producer.abort_transaction(), 30)


async def _release(clients: TaskClients, key: Hashable, cache: ClientCache[TaskClients] | None) -> None:
    if cache is not None:
        await cache.give_back(key, clients)
    else:
        await close_clients(clients)


async def begin(sink: SinkOptions, who: TaskWrite, cache: ClientCache[TaskClients] | None = None
                ) -> TaskTransaction | None:
    """Steps 1-4 up to the records: the task's transaction with its marker in it, or None if this
    batch was committed already (a replay). With a `cache`, a kept producer is used when there is
    one (see the module's docstring for why that stays exactly once) and given back on commit."""
    assert sink.marker_topic is not None
    group = who.marker_group(sink.txn_prefix)
    marker = TopicPartition(sink.marker_topic, 0)
    key = _key(sink, who)
    clients = cache.take(key) if cache is not None else None
    if clients is None:
        clients = await open_clients(sink, who)
        kept = False
    else:
        # This worker kept the producer since it committed (or skipped) batch `last_batch` of the
        # task. If the task has moved further on since, another producer wrote for it in between
        # and so has fenced this one: renew it at once (the check below would catch it anyway,
        # a round trip later).
        kept = who.batch_id in (clients.last_batch, clients.last_batch + 1)
        if not kept:
            await _renew(clients, sink, who)
    while True:
        try:
            read = committed_batch(clients.marker_reader, marker)
            done = await (asyncio.wait_for(read, KEPT_MARKER_WAIT_S) if kept else read)
            if done is not None and done >= who.batch_id:
                clients.last_batch = who.batch_id
                await _release(clients, key, cache)
                return None
            await clients.producer.begin_transaction()
            meta = json.dumps({"batch": who.batch_id})
            await clients.producer.send_offsets_to_transaction({marker: OffsetAndMetadata(who.batch_id + 1, meta)},
                                                              group)
            return TaskTransaction(clients, who.batch_id, key, cache)
        except BaseException as exc:
            if not kept or not isinstance(exc, (KafkaClientError, TimeoutError)):
                await TaskTransaction(clients, who.batch_id, key, None).fail()
                raise
            # a kept producer that was fenced, or is stuck behind another attempt's open
            # transaction: start over at step 1 with a new one (its init ends that transaction)
            await _renew(clients, sink, who)
            kept = False


async def _renew(clients: TaskClients, sink: SinkOptions, who: TaskWrite) -> None:
    """Replace the producer by a new one, initialised (step 1); the marker reader stays."""
    await abort_quietly(clients.producer)
    with contextlib.suppress(Exception):
        await clients.producer.close()
    try:
        clients.producer = await _init(_new_producer(sink, who))
    except BaseException:
        await close_clients(clients)
        raise


async def write_once(sink: SinkOptions, who: TaskWrite, records: Iterable[OutRecord],
                     cache: ClientCache[TaskClients] | None = None) -> TaskOutcome:
    """Steps 1-4 above. Any failure raises: Spark fails the attempt and runs another, which fences
    this one and starts over from the marker."""
    txn = await begin(sink, who, cache)
    if txn is None:
        return TaskOutcome(rows=0, skipped=True)
    try:
        await txn.send_records(records)
    except BaseException:
        await txn.fail()
        raise
    return await txn.commit()
