"""The writing half of the `ketch` data source: batch and streaming writers, Arrow or row based.

Each task commits its own output exactly once (exactly_once.py). Spark's driver-side commit()
therefore has nothing left to make visible: it is a no-op that only reports, which is what makes
a second commit() of the same batch harmless. abort() has nothing to undo either: committed task
outputs are final, uncommitted ones are aborted by the broker (fencing or transaction timeout).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator

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

from client import Admin

from .exactly_once import TaskOutcome, TaskWrite, write_once_sync
from .options import OptionError, SinkOptions
from .records_out import OutRecord, check_sink_schema, from_arrow, from_rows

log = logging.getLogger("ketch.pipeline.sink")

# Local properties Spark's micro-batch engine sets on every job it runs, visible to the tasks.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


class TaskCommit(WriterCommitMessage):
    """What a task reports to the driver's commit()."""

    def __init__(self, partition_id: int, batch_id: int, outcome: TaskOutcome) -> None:
        self.partition_id, self.batch_id = partition_id, batch_id
        self.rows, self.skipped = outcome.rows, outcome.skipped


def prepare_sink(sink: SinkOptions, schema: StructType) -> None:
    """Driver-side checks, so a misconfigured job fails at start, not in every task."""
    check_sink_schema(schema, sink.topic)
    if not sink.marker_topic:
        raise OptionError("with a per-row 'topic' column, name an existing markerTopic for the sink's markers")
    marker = sink.marker_topic

    async def check() -> None:
        async with Admin(sink.bootstrap) as admin:
            await admin.describe_topics([marker])

    try:
        asyncio.run(check())
    except Exception as exc:
        raise OptionError(f"marker topic {marker!r} is not usable (create it first): {exc}") from exc


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
        self.sink = sink
        self.run_id = f"batch-{uuid.uuid4()}"

    def _write(self, records: Iterator[OutRecord]) -> TaskCommit:
        part = _task().partitionId()
        outcome = write_once_sync(self.sink, TaskWrite(self.run_id, 0, part), records)
        return TaskCommit(part, 0, outcome)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("ketch batch write %s committed: %s", self.run_id, _summary(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("ketch batch write %s failed; tasks that committed stay visible: %s",
                    self.run_id, _summary(messages))


class KetchBatchWriter(_BatchBase, DataSourceWriter):
    def write(self, iterator: Iterator[Row]) -> TaskCommit:
        return self._write(from_rows(iterator, self.sink.topic))


class KetchBatchArrowWriter(_BatchBase, DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:  # type: ignore[override]
        return self._write(from_arrow(iterator, self.sink.topic))


class _StreamBase:
    """Run id = the streaming query's id (kept in the checkpoint, so a restarted query gets the
    same transactional ids and markers), batch id = the micro-batch's."""

    def __init__(self, sink: SinkOptions) -> None:
        self.sink = sink

    def _write(self, records: Iterator[OutRecord]) -> TaskCommit:
        ctx, query_id, batch = _stream_task()
        part = ctx.partitionId()
        outcome = write_once_sync(self.sink, TaskWrite(query_id, batch, part), records)
        return TaskCommit(part, batch, outcome)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("ketch stream batch %d committed: %s", batchId, _summary(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("ketch stream batch %d failed; it is replayed on restart: %s", batchId, _summary(messages))


class KetchStreamWriter(_StreamBase, DataSourceStreamWriter):
    def write(self, iterator: Iterator[Row]) -> TaskCommit:
        return self._write(from_rows(iterator, self.sink.topic))


class KetchStreamArrowWriter(_StreamBase, DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:  # type: ignore[override]
        return self._write(from_arrow(iterator, self.sink.topic))
