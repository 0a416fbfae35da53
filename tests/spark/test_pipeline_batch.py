"""Batch read of a topic range and batch write through the `ketch` data source."""

from __future__ import annotations

import asyncio

import pytest
from pipeline_support import create_topics, read_committed_sync
from pyspark.sql import SparkSession

from client import Producer
from pipeline.schema import SOURCE_SCHEMA

pytestmark = pytest.mark.spark


async def _produce_plain(bootstrap: str, topic: str, per_partition: int) -> None:
    async with Producer(bootstrap) as p:
        for i in range(per_partition):
            for part in (0, 1):
                await p.send(topic, b"v%d-%d" % (part, i), key=b"k%d" % i, partition=part,
                             headers=[("i", str(i).encode()), ("empty", None)])
        await p.flush()


@pytest.mark.parametrize("use_arrow", ["true", "false"])
def test_batch_read_of_an_offset_range(spark: SparkSession, module_broker, topic: str, use_arrow: str) -> None:
    b = module_broker.bootstrap
    asyncio.run(create_topics(b, [topic]))
    asyncio.run(_produce_plain(b, topic, 60))
    df = (spark.read.format("ketch").option("kafka.bootstrap.servers", b).option("subscribe", topic)
          .option("startingOffsets", f'{{"{topic}": {{"0": 10, "1": -2}}}}')
          .option("endingOffsets", f'{{"{topic}": {{"0": 25, "1": -1}}}}')
          .option("useArrow", use_arrow).load())
    assert df.schema == SOURCE_SCHEMA
    rows = df.collect()
    got = sorted((r.partition, r.offset) for r in rows)
    assert got == [(0, o) for o in range(10, 25)] + [(1, o) for o in range(60)]
    by_pos = {(r.partition, r.offset): r for r in rows}
    r = by_pos[(0, 12)]
    assert (r.topic, r.key, r.value, r.timestampType) == (topic, b"k12", b"v0-12", 0)
    assert [(h.key, h.value) for h in r.headers] == [("i", b"12"), ("empty", None)]
    assert r.timestamp.year >= 2024


def test_batch_read_skips_aborted_transactions(spark: SparkSession, module_broker, topic: str) -> None:
    from pipeline_support import produce_with_aborts

    b = module_broker.bootstrap
    asyncio.run(create_topics(b, [topic]))
    committed = asyncio.run(produce_with_aborts(b, topic, 120, txn_size=20, abort_every=2))
    rows = spark.read.format("ketch").option("kafka.bootstrap.servers", b).option("subscribe", topic).load().collect()
    assert sorted((r.key, r.value) for r in rows) == sorted(committed)
    uncommitted = (spark.read.format("ketch").option("kafka.bootstrap.servers", b).option("subscribe", topic)
                   .option("kafka.isolation.level", "read_uncommitted").load().collect())
    assert sum(1 for r in uncommitted if r.value.startswith(b"ABORTED")) == 60  # 3 aborted transactions of 20


@pytest.mark.parametrize("use_arrow", ["true", "false"])
def test_batch_write(spark: SparkSession, module_broker, topic: str, use_arrow: str) -> None:
    b = module_broker.bootstrap
    other = topic + "-other"
    asyncio.run(create_topics(b, [topic, other]))
    data = [(f"k{i}", f"value-{i}".encode(), other if i % 10 == 0 else None, i % 2,
             [("n", str(i).encode())]) for i in range(300)]
    df = spark.createDataFrame(
        data, "key string, value binary, topic string, partition int, headers array<struct<key:string,value:binary>>"
    ).repartition(3)
    (df.write.format("ketch").mode("append").option("kafka.bootstrap.servers", b).option("topic", topic)
     .option("useArrow", use_arrow).save())
    main, side = read_committed_sync(b, topic), read_committed_sync(b, other)
    assert sorted((r.key, r.value, r.partition, r.headers) for r in main) == sorted(
        (f"k{i}".encode(), f"value-{i}".encode(), i % 2, (("n", str(i).encode()),)) for i in range(300) if i % 10)
    assert sorted(r.value for r in side) == sorted(f"value-{i}".encode() for i in range(0, 300, 10))


def test_batch_write_refuses_a_dataframe_without_value(spark: SparkSession, module_broker, topic: str) -> None:
    asyncio.run(create_topics(module_broker.bootstrap, [topic]))
    df = spark.createDataFrame([("a",)], "key string")
    with pytest.raises(Exception, match="needs a 'value' column"):
        df.write.format("ketch").mode("append").option("kafka.bootstrap.servers", module_broker.bootstrap) \
            .option("topic", topic).save()
