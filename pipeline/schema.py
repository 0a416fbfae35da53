"""The row shape of the `ketch` source and how fetched records become Spark rows or Arrow batches.

The columns and their order are those of Spark's own Kafka source (with `includeHeaders`), so a job
written against `format("kafka")` reads the same DataFrame from `format("ketch")`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from client import ConsumerRecord, FetchedBatches
from client.arrow import to_arrow

HEADER_TYPE = StructType([StructField("key", StringType()), StructField("value", BinaryType())])

SOURCE_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
    StructField("headers", ArrayType(HEADER_TYPE)),
])

# PySpark compares a returned batch's schema with exactly this one (types, names and nullability),
# so it is derived from SOURCE_SCHEMA the way PySpark derives it, never spelled out by hand.
SOURCE_ARROW_SCHEMA: pa.Schema = to_arrow_schema(SOURCE_SCHEMA, timezone="UTC")

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


_MICROS_PER_MILLI = pa.scalar(1000, pa.int64())


def fetched_to_arrow(fetched: FetchedBatches, end: int) -> pa.RecordBatch:
    """One Arrow batch for the records of one fetch below offset `end`, decoded column-wise
    (client/arrow.py): the JVM takes it as is, no per-row Python conversion."""
    cols = to_arrow(fetched)
    offsets = cols.column("offset")
    if cols.num_rows and offsets[-1].as_py() >= end:
        cols = cols.filter(pc.less(offsets, pa.scalar(end, pa.int64())))
    n = cols.num_rows
    topic, partition = fetched.tp
    columns = [
        cols.column("key"),
        cols.column("value"),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        cols.column("offset"),
        # milliseconds -> the microseconds Spark's TimestampType carries
        pc.multiply(cols.column("timestamp"), _MICROS_PER_MILLI).cast(pa.timestamp("us", tz="UTC")),
        cols.column("timestamp_type"),
        cols.column("headers").cast(SOURCE_ARROW_SCHEMA.field("headers").type),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=SOURCE_ARROW_SCHEMA)


def record_to_tuple(r: ConsumerRecord) -> tuple[Any, ...]:
    """The row-at-a-time form: PySpark converts every value itself (the slow path, kept for the
    `useArrow=false` comparison and for PySpark builds without Arrow)."""
    return (
        r.key, r.value, r.topic, r.partition, r.offset,
        _EPOCH + dt.timedelta(milliseconds=r.timestamp), r.timestamp_type,
        [(k, v) for k, v in r.headers],
    )
