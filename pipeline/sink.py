"""The writing half of the `ketch` data source: batch and streaming writers, Arrow or row based.

Per-task mode (the default): each task commits its own output exactly once (exactly_once.py).
Spark's driver-side commit() therefore has nothing left to make visible: it is a no-op that only
reports, which is what makes a second commit() of the same batch harmless. abort() has nothing to
undo either: committed task outputs are final, uncommitted ones are aborted by the broker (fencing
or transaction timeout).

Batch-atomic mode (streaming only): tasks prepare their transactions, and the driver's commit()
commits them together behind the batch's gate, abort() aborts them (atomic.py).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Coroutine, Iterable, Iterator
from itertools import islice
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import Row
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from client import PreparedTransaction

from . import atomic, broker_io, runtime
from .exactly_once import TaskClients, TaskOutcome, TaskOutput, TaskWrite, begin, close_clients
from .options import OptionError, SinkOptions
from .records_out import OutRecord, arrow_runs, check_sink_schema, from_arrow, from_rows

log = logging.getLogger("ketch.pipeline.sink")

# Local properties Spark's micro-batch engine sets on every job it runs, visible to the tasks.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


class TaskCommit(WriterCommitMessage):
    """What a task reports to the driver's commit()."""

    def __init__(self, who: TaskWrite, outcome: TaskOutcome) -> None:
        self.partition_id, self.batch_id, self.query_id = who.partition_id, who.batch_id, who.run_id
        self.rows, self.skipped = outcome.rows, outcome.skipped
        self.token: PreparedTransaction | None = outcome.token


def prepare_sink(sink: SinkOptions, schema: StructType) -> None:
    """Driver-side checks, so a misconfigured job fails at start, not in every task."""
    check_sink_schema(schema, sink.topic)
    if not sink.marker_topic:
        raise OptionError("with a per-row 'topic' column, name an existing markerTopic for the sink's markers")
    marker = sink.marker_topic

    try:
        runtime.run(broker_io.describe_topics(sink, [marker]))
    except Exception as exc:
        raise OptionError(f"marker topic {marker!r} is not usable (create it first): {exc}") from exc


def prepare_stream_sink(sink: SinkOptions, schema: StructType) -> None:
    """prepare_sink, and in batch-atomic mode the batch's gate. Spark calls the data source's
    streamWriter() where it plans each micro-batch's write, before the batch's tasks run (and
    again where it commits the batch: the gate is open then, and stays so)."""
    prepare_sink(sink, schema)
    if sink.batch_atomic:
        if "topic" in schema.fieldNames():
            raise OptionError("commitMode batch-atomic writes the one topic of the 'topic' option (its gate covers "
                              "that topic's partitions): drop the 'topic' column, or use commitMode per-task")
        runtime.run(atomic.ensure_gate(sink))


ROWS_PER_HANDOFF = 2048  # records handed to the loop thread at once on the row path


def _tasks_cache() -> runtime.ClientCache[TaskClients]:
    return runtime.runtime().cache("sink", close_clients)


def write_rows(sink: SinkOptions, who: TaskWrite, records: Iterable[OutRecord]) -> TaskOutcome:
    """One task's records, exactly once (exactly_once.py), on this worker's loop with its kept
    producers; Spark's iterator is read here, in the task's own thread."""
    return _write(sink, who, lambda txn: _row_chunks(txn, records))


def write_arrow(sink: SinkOptions, who: TaskWrite, batches: Iterable[pa.RecordBatch]) -> TaskOutcome:
    """As write_rows, from Arrow batches: framed in this thread (Arrow compute, no per-record
    Python), sent on the loop thread meanwhile."""
    def steps(txn: TaskOutput) -> Iterator[Coroutine[Any, Any, None]]:
        partitions: dict[str, int] = {}

        def partitions_of(topic: str) -> int:
            if topic not in partitions:
                partitions[topic] = runtime.run(txn.partitions(topic))
            return partitions[topic]

        for b in batches:
            runs = arrow_runs(b, sink.topic, partitions_of, sink.batch_size)
            if runs is None:
                yield from _row_chunks(txn, from_arrow([b], sink.topic))
            else:
                yield txn.send_runs(runs)
    return _write(sink, who, steps)


def _row_chunks(txn: TaskOutput, records: Iterable[OutRecord]) -> Iterator[Coroutine[Any, Any, None]]:
    it = iter(records)
    while chunk := list(islice(it, ROWS_PER_HANDOFF)):
        yield txn.send_records(chunk)


def _write(sink: SinkOptions, who: TaskWrite,
           steps: Callable[[TaskOutput], Iterable[Coroutine[Any, Any, None]]]) -> TaskOutcome:
    rt = runtime.runtime()
    txn = rt.run(_begin(sink, who))
    if isinstance(txn, TaskOutcome):
        return txn
    try:
        for step in steps(txn):
            rt.run(step)
    except BaseException:
        rt.run(txn.fail())
        raise
    return rt.run(txn.finish())


async def _begin(sink: SinkOptions, who: TaskWrite) -> TaskOutput | TaskOutcome:
    if sink.batch_atomic:
        return await atomic.begin(sink, who)
    txn = await begin(sink, who, _tasks_cache())
    return TaskOutcome(rows=0, skipped=True) if txn is None else txn


def _task() -> TaskContext:
    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("write() must run inside a Spark task")
    return ctx


def _stream_task() -> tuple[TaskContext, str, int]:
    ctx = _task()
    query_id, batch = ctx.getLocalProperty(QUERY_ID_PROPERTY), ctx.getLocalProperty(BATCH_ID_PROPERTY)
    if not query_id or batch is None:
        raise RuntimeError(f"no {QUERY_ID_PROPERTY}/{BATCH_ID_PROPERTY} in the task's properties: "
                           "the streaming writer must run in a micro-batch query")
    return ctx, query_id, int(batch)


def _summary(messages: list[WriterCommitMessage | None]) -> str:
    done = [m for m in messages if isinstance(m, TaskCommit)]
    written = sum(m.rows for m in done)
    skipped = sum(1 for m in done if m.skipped)
    return f"{len(done)} tasks, {written} records written, {skipped} tasks replayed (already committed)"


class _BatchBase:
    """One batch job = one run: a fresh id per writer, batch id 0. Task retries within the job
    are exactly once; the job as a whole is not atomic (a failed job keeps its committed tasks)."""

    def __init__(self, sink: SinkOptions) -> None:
        if sink.batch_atomic:
            raise OptionError("commitMode batch-atomic is for streaming writes; a batch write commits per task")
        self.sink = sink
        self.run_id = f"batch-{uuid.uuid4()}"

    def _who(self) -> TaskWrite:
        return TaskWrite(self.run_id, 0, _task().partitionId())

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("ketch batch write %s committed: %s", self.run_id, _summary(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("ketch batch write %s failed; tasks that committed stay visible: %s",
                    self.run_id, _summary(messages))


class KetchBatchWriter(_BatchBase, DataSourceWriter):
    def write(self, iterator: Iterator[Row]) -> TaskCommit:
        who = self._who()
        return TaskCommit(who, write_rows(self.sink, who, from_rows(iterator, self.sink.topic)))


class KetchBatchArrowWriter(_BatchBase, DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:  # type: ignore[override]
        who = self._who()
        return TaskCommit(who, write_arrow(self.sink, who, iterator))


class _StreamBase:
    """Run id = the streaming query's id (kept in the checkpoint, so a restarted query gets the
    same transactional ids and markers), batch id = the micro-batch's."""

    def __init__(self, sink: SinkOptions) -> None:
        self.sink = sink

    def _who(self) -> TaskWrite:
        ctx, query_id, batch = _stream_task()
        return TaskWrite(query_id, batch, ctx.partitionId())

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.sink.batch_atomic:
            reports = [m for m in messages if isinstance(m, TaskCommit)]
            if reports:
                tasks = [atomic.TaskReport(m.partition_id, m.token) for m in reports]
                runtime.run(atomic.commit_batch(self.sink, reports[0].query_id, batchId, tasks,
                                                lambda point: self._reached(point, batchId)))
            else:  # a micro-batch without tasks: only its gate to end
                runtime.run(atomic.end_gate(self.sink))
        log.info("ketch stream batch %d committed: %s", batchId, _summary(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.sink.batch_atomic:
            reports = [m for m in messages if isinstance(m, TaskCommit)]
            tokens = [m.token for m in reports if m.token is not None]
            runtime.run(atomic.abort_batch(self.sink, reports[0].query_id if reports else None, batchId, tokens))
        log.warning("ketch stream batch %d failed; it is replayed on restart: %s", batchId, _summary(messages))

    def _reached(self, point: str, batch_id: int) -> None:
        """Called at each step of a batch-atomic commit (atomic.commit_batch); does nothing. The
        driver-kill tests (tests/spark/atomic_job.py) override it to kill the driver there."""


class KetchStreamWriter(_StreamBase, DataSourceStreamWriter):
    def write(self, iterator: Iterator[Row]) -> TaskCommit:
        who = self._who()
        return TaskCommit(who, write_rows(self.sink, who, from_rows(iterator, self.sink.topic)))


class KetchStreamArrowWriter(_StreamBase, DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:  # type: ignore[override]
        who = self._who()
        return TaskCommit(who, write_arrow(self.sink, who, iterator))
