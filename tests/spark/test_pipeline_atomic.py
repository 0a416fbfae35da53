"""The sink's batch-atomic mode in the test process's SparkSession: a read_committed reader watching
the output topic throughout a streaming query never sees part of a micro-batch, and the output is
exactly once; without 2PC on the broker the mode is refused at the query's start."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from atomic_support import ALLOW_2PC, AtomicVerdict, LsoWatcher, gate_offsets
from pipeline_support import create_topics, produce_with_aborts
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def start_copy(spark: SparkSession, bootstrap: str, src: str, out: str, checkpoint: Path,
               per_trigger: int) -> StreamingQuery:
    """Every input record's position (partition:offset) to `out`, batch-atomic, availableNow. The
    position is the key too, so that every task writes to every output partition (with the input's
    keys, each input partition's records would all hash to the output partition of the same number)."""
    rows = (spark.readStream.format("ketch").option("kafka.bootstrap.servers", bootstrap).option("subscribe", src)
            .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(per_trigger)).load())
    pos = F.concat_ws(":", F.col("partition").cast("string"), F.col("offset").cast("string"))
    copied = rows.select(pos.alias("key"), pos.alias("value"))
    return (copied.writeStream.format("ketch").option("kafka.bootstrap.servers", bootstrap).option("topic", out)
            .option("commitMode", "batch-atomic").option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start())


def test_a_read_committed_reader_sees_each_micro_batch_whole_or_not_at_all(
        spark: SparkSession, broker_factory, topic: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(env=ALLOW_2PC).bootstrap
    src, out, ck = topic, topic + "-out", tmp_path / "ck"
    asyncio.run(create_topics(b, [src, out]))
    asyncio.run(produce_with_aborts(b, src, 600, txn_size=40, abort_every=3))
    watcher = LsoWatcher(b, out, 2).start()
    try:
        q = start_copy(spark, b, src, out, ck, 90)
        q.awaitTermination(240)
        assert not q.isActive, "the availableNow query did not finish within 240s"
        assert q.exception() is None, q.exception()
    finally:
        seen = watcher.stop()
    verdict = AtomicVerdict(b, src, out, ck, context=f"{watcher.samples} LSO samples")
    verdict.check_exactly_once()
    assert len(verdict.batches) >= 5, "maxOffsetsPerTrigger should have split the input"
    verdict.check_batches_whole(seen)
    # How: each batch's records follow, in every partition, a gate record written after the
    # previous batch's records, and held the LSO until the whole batch was committed.
    gates = asyncio.run(gate_offsets(b, out, 2))
    for p, by_batch in verdict.spans().items():
        previous = -1
        for batch in sorted(by_batch):
            first, last = by_batch[batch]
            assert any(previous < g < first for g in gates[p]), f"batch {batch} in partition {p} was not gated"
            previous = last


def test_batch_atomic_mode_is_refused_where_the_broker_does_not_allow_2pc(
        spark: SparkSession, module_broker, topic: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    b = module_broker.bootstrap
    src, out = topic, topic + "-out"
    asyncio.run(create_topics(b, [src, out]))
    asyncio.run(produce_with_aborts(b, src, 20, txn_size=10, abort_every=5))
    q = start_copy(spark, b, src, out, tmp_path / "ck", 90)
    with pytest.raises(Exception, match="transaction_two_phase_commit_enable"):
        q.awaitTermination(120)
        raise AssertionError(f"the query ran: {q.exception()}")
