"""The reading half of the `ketch` data source: batch and streaming readers.

A read is planned on the driver as one input partition per Kafka partition with a fixed offset
range [start, end), and executed in a task by a consumer that reads exactly that range. Ranges
are fixed before any task runs, which is what makes a streaming micro-batch replayable: Spark
writes the (start, end) offsets of a batch to its offset log before running it, and after a crash
plans the same batch again from the same offsets, which yields the same records.

The streaming reader keeps no offsets of its own: Spark's checkpoint holds them (`commit()` has
nothing to do). With `kafka.isolation.level=read_committed` (the default) the end of a range is
the partition's last stable offset, so a batch never waits on, nor includes, an undecided
transaction, and aborted records are filtered out by the consumer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from client import FetchedBatches

from . import broker_io
from .offsets import Offsets, TopicPartition, cap, from_json_dict, parse_spec, resolve, to_json_dict
from .options import OptionError, SourceOptions


class RangePartition(InputPartition):
    """Offsets [start, end) of one Kafka partition: one Spark task."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


def _read(opts: SourceOptions, part: InputPartition) -> Iterator[Any]:
    # Imported here, in the task: the driver's streaming source runner (a fresh process per query)
    # plans micro-batches and never converts records, and pyarrow.compute costs it about 30 ms.
    from .schema import fetched_to_arrow, record_to_tuple

    assert isinstance(part, RangePartition), part
    tp = TopicPartition(part.topic, part.partition)
    if opts.use_arrow:
        def to_arrow(fetched: FetchedBatches) -> Iterable[Any]:
            batch = fetched_to_arrow(fetched, part.end)
            return (batch,) if batch.num_rows else ()
        return broker_io.read_batches(opts, tp, part.start, part.end, to_arrow)
    return broker_io.read_range(opts, tp, part.start, part.end, lambda chunk: map(record_to_tuple, chunk))


def _ranges(start: Offsets, end: Offsets) -> list[InputPartition]:
    return [RangePartition(t, p, start[TopicPartition(t, p)], end[TopicPartition(t, p)])
            for (t, p) in sorted(end) if end[TopicPartition(t, p)] > start[TopicPartition(t, p)]]


class KetchBatchReader(DataSourceReader):
    """`spark.read.format("ketch")`: startingOffsets (default earliest) to endingOffsets (default
    latest, i.e. the last stable offset at read_committed), resolved once when the query is planned."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        tps = broker_io.discover(self.opts)
        earliest, latest = broker_io.bounds(self.opts, tps)
        start = resolve(parse_spec(self.opts.starting), tps, earliest, latest)
        end = resolve(parse_spec(self.opts.ending), tps, earliest, latest)
        backwards = {tp: (start[tp], end[tp]) for tp in tps if end[tp] < start[tp]}
        if backwards:
            raise OptionError(f"endingOffsets lie before startingOffsets for {backwards}")
        return _ranges(start, end)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.opts, partition)


class KetchStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream.format("ketch")`: micro-batches of offset ranges, offsets in Spark's checkpoint."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._spec = parse_spec(opts.starting)
        self._target: Offsets | None = None  # availableNow: never read past these

    def initialOffset(self) -> dict:
        tps = broker_io.discover(self.opts)
        earliest, latest = broker_io.bounds(self.opts, tps)
        return to_json_dict(resolve(self._spec, tps, earliest, latest))

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = broker_io.discover(self.opts)
        self._target = broker_io.bounds(self.opts, tps)[1]

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = self._complete(from_json_dict(start))
        if self._target is not None:
            end = {tp: max(begin.get(tp, 0), o) for tp, o in self._target.items()}
        else:
            latest = broker_io.bounds(self.opts, sorted(begin))[1]
            end = {tp: max(begin[tp], latest[tp]) for tp in begin}
        for tp, o in begin.items():  # a partition we can no longer see keeps its offset
            end.setdefault(tp, o)
        if isinstance(limit, ReadMaxRows):
            end = cap(begin, end, limit.max_rows)
        return to_json_dict(end)

    def _complete(self, start: Offsets) -> Offsets:
        """`start` plus partitions that appeared since (a subscribed topic grew): they are read from
        their earliest offset, which is also what partitions() assumes for a partition `start`
        does not name."""
        tps = broker_io.discover(self.opts)
        new = [tp for tp in tps if tp not in start]
        if not new:
            return dict(start)
        earliest = broker_io.bounds(self.opts, new)[0]
        return {**start, **{tp: earliest[tp] for tp in new}}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, stop = from_json_dict(start), from_json_dict(end)
        missing: list[TopicPartition] = [tp for tp in stop if tp not in begin]
        if missing:
            begin.update(broker_io.bounds(self.opts, missing)[0])
        return _ranges(begin, stop)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.opts, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, not in a consumer group."""
