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
4. Otherwise, in one transaction: every record of the task, plus the marker advanced to this
   batch (TxnOffsetCommit). Both become visible together or not at all.

So for every (batch, task) either all records and the marker are committed once, or nothing is;
a replay sees the marker and skips. The limits are in docs/pipeline.md.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass

from client import Consumer, OffsetAndMetadata, Producer, TopicPartition

from .options import SinkOptions
from .records_out import OutRecord


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
    skipped: bool  # the batch had been committed by an earlier attempt: nothing written


async def committed_batch(bootstrap: str, group: str, marker: TopicPartition) -> int | None:
    """The last batch id this task committed, None if none yet."""
    async with Consumer(bootstrap, group_id=group, isolation_level="read_committed",
                        enable_auto_commit=False) as c:
        offset = await c.committed(marker)
    return None if offset is None else offset - 1


async def write_once(sink: SinkOptions, who: TaskWrite, records: Iterable[OutRecord]) -> TaskOutcome:
    """Steps 1-4 above. Any failure raises: Spark fails the attempt and runs another, which fences
    this one and starts over from the marker."""
    assert sink.marker_topic is not None
    tid = who.transactional_id(sink.txn_prefix)
    group = who.marker_group(sink.txn_prefix)
    marker = TopicPartition(sink.marker_topic, 0)
    producer = Producer(sink.bootstrap, transactional_id=tid, transaction_timeout_ms=sink.transaction_timeout_ms,
                        linger_ms=sink.linger_ms, batch_size=sink.batch_size)
    await producer.start()
    try:
        await producer.init_transactions()
        done = await committed_batch(sink.bootstrap, group, marker)
        if done is not None and done >= who.batch_id:
            return TaskOutcome(rows=0, skipped=True)
        rows = 0
        async with producer.transaction():
            for r in records:
                await producer.send(r.topic, r.value, key=r.key, partition=r.partition, headers=r.headers or None)
                rows += 1
            meta = json.dumps({"batch": who.batch_id, "rows": rows})
            await producer.send_offsets_to_transaction({marker: OffsetAndMetadata(who.batch_id + 1, meta)}, group)
        return TaskOutcome(rows=rows, skipped=False)
    finally:
        await producer.close()


def write_once_sync(sink: SinkOptions, who: TaskWrite, records: Iterable[OutRecord]) -> TaskOutcome:
    """For Spark's synchronous write(): one event loop per task, closed when the task's write ends."""
    return asyncio.run(write_once(sink, who, records))
