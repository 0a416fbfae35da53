"""The row shape of the `ketch` source and how client records become Spark rows or Arrow batches.

The columns and their order are those of Spark's own Kafka source (with `includeHeaders`), so a job
written against `format("kafka")` reads the same DataFrame from `format("ketch")`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
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

from client import ConsumerRecord

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


def records_to_arrow(records: Sequence[ConsumerRecord]) -> pa.RecordBatch:
    """One Arrow batch for a run of records: the JVM takes it as is, no per-row Python conversion."""
    n = len(records)
    topic = records[0].topic if n else ""
    partition = records[0].partition if n else 0
    columns = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        # milliseconds -> the microseconds Spark's TimestampType carries
        pa.array([r.timestamp * 1000 for r in records], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array([r.timestamp_type for r in records], pa.int32()),
        pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records],
                 SOURCE_ARROW_SCHEMA.field("headers").type),
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
