"""Streaming read -> transform -> exactly-once streaming write, in the test process's SparkSession."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from pipeline_support import checkpoint_batches, create_topics, produce_with_aborts, read_committed_sync
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

pytestmark = pytest.mark.spark


def _transform(spark: SparkSession, bootstrap: str, topic: str, max_per_trigger: int) -> DataFrame:
    src = (spark.readStream.format("ketch").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
           .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(max_per_trigger)).load())
    return src.select("key", F.concat(F.lit(b"out-"), F.col("value")).alias("value"))


def _run_available_now(df: DataFrame, bootstrap: str, out_topic: str, checkpoint: Path) -> None:
    q = (df.writeStream.format("ketch").option("kafka.bootstrap.servers", bootstrap).option("topic", out_topic)
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert not q.isActive, "the availableNow query did not finish within 300s"
    assert q.exception() is None, q.exception()


def _expected(committed: list[tuple[bytes, bytes]]) -> Counter[tuple[bytes, bytes]]:
    return Counter((k, b"out-" + v) for k, v in committed)


def test_stream_reads_committed_only_and_writes_each_record_once(
        spark: SparkSession, module_broker, topic: str, tmp_path: Path) -> None:
    b, out = module_broker.bootstrap, topic + "-out"
    asyncio.run(create_topics(b, [topic, out]))
    committed = asyncio.run(produce_with_aborts(b, topic, 400, txn_size=40, abort_every=3))
    _run_available_now(_transform(spark, b, topic, 120), b, out, tmp_path / "ck")
    got = Counter((r.key, r.value) for r in read_committed_sync(b, out))
    assert got == _expected(committed)
    assert len(checkpoint_batches(tmp_path / "ck")) >= 3, "maxOffsetsPerTrigger should have split the input"


def test_replayed_batch_is_not_written_twice(spark: SparkSession, module_broker, topic: str, tmp_path: Path) -> None:
    """Spark replays a batch whose commit-log entry is missing (a crash after the sink wrote it).
    Deleting that entry forces exactly this replay; the markers must turn it into a no-op."""
    b, out = module_broker.bootstrap, topic + "-out"
    ck = tmp_path / "ck"
    asyncio.run(create_topics(b, [topic, out]))
    committed = asyncio.run(produce_with_aborts(b, topic, 200, txn_size=50, abort_every=2))
    _run_available_now(_transform(spark, b, topic, 90), b, out, ck)
    batches = checkpoint_batches(ck)
    last = max(batches)
    (ck / "commits" / str(last)).unlink()
    for crc in (ck / "commits").glob(f".{last}.crc"):
        crc.unlink()
    committed += asyncio.run(produce_with_aborts(b, topic, 60, txn_size=30, abort_every=2, first=1000))
    _run_available_now(_transform(spark, b, topic, 90), b, out, ck)
    rerun = checkpoint_batches(ck)
    assert rerun[last] == batches[last], "the replayed batch must cover the same offsets"
    assert max(rerun) > last
    got = Counter((r.key, r.value) for r in read_committed_sync(b, out))
    assert got == _expected(committed)
