"""What a sink task sends: Spark rows or Arrow batches turned into (topic, key, value, partition, headers).

The input columns are those of Spark's Kafka sink: `value` (required), `key`, `topic` (else the
`topic` option), `partition` (else the producer's partitioner on the key) and `headers`. Keys and
values may be binary or string (strings are sent as UTF-8).

Arrow batches without per-row topics or headers (the usual case) become framed runs of records,
one batch per run (`arrow_runs`, client/arrow.py): no Python object per record. Others go record
by record (`from_arrow`), as rows do.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Row
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from client.arrow import encode, partitions_for_keys
from client.structs import EncodedRecords

from .options import OptionError

SINK_COLUMNS = ("key", "value", "topic", "partition", "headers")


class OutRecord(NamedTuple):
    topic: str
    key: bytes | None
    value: bytes | None
    partition: int | None
    headers: tuple[tuple[str, bytes | None], ...]


def check_sink_schema(schema: StructType, default_topic: str | None) -> None:
    """Refuse, on the driver, a DataFrame the sink could only fail on in every task."""
    names = set(schema.fieldNames())
    if "value" not in names:
        raise OptionError(f"the sink needs a 'value' column; the DataFrame has {sorted(names)}")
    for col in ("key", "value"):
        if col in names and not isinstance(schema[col].dataType, (BinaryType, StringType)):
            raise OptionError(f"column {col!r} must be binary or string, not {schema[col].dataType.simpleString()}")
    if "topic" in names and not isinstance(schema["topic"].dataType, StringType):
        raise OptionError("column 'topic' must be a string")
    if "partition" in names and not isinstance(schema["partition"].dataType, IntegerType):
        raise OptionError("column 'partition' must be an int")
    if "topic" not in names and not default_topic:
        raise OptionError("no 'topic' column and no topic option: where should records go?")


def _bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    return bytes(v)  # bytearray / memoryview


def _headers(v: Any) -> tuple[tuple[str, bytes | None], ...]:
    if not v:
        return ()
    out = []
    for h in v:
        if isinstance(h, dict):
            out.append((h["key"], _bytes(h["value"])))
        else:  # a Row or a tuple
            out.append((h[0], _bytes(h[1])))
    return tuple(out)


def _topic(t: str | None, default: str | None) -> str:
    topic = t or default
    if not topic:
        raise OptionError("a row has no topic and there is no topic option")
    return topic


def from_rows(rows: Iterable[Row], default_topic: str | None) -> Iterator[OutRecord]:
    for r in rows:
        d = r.asDict(recursive=False)
        yield OutRecord(_topic(d.get("topic"), default_topic), _bytes(d.get("key")), _bytes(d.get("value")),
                        d.get("partition"), _headers(d.get("headers")))


def from_arrow(batches: Iterable[pa.RecordBatch], default_topic: str | None) -> Iterator[OutRecord]:
    """Column-wise: one to_pylist() per column per batch instead of a Row object per record."""
    for b in batches:
        n = b.num_rows
        names = b.schema.names

        def col(name: str, fill: Any, b: pa.RecordBatch = b, n: int = n, names: list[str] = names) -> list[Any]:
            return b.column(name).to_pylist() if name in names else [fill] * n

        values, keys = col("value", None), col("key", None)
        topics, parts, hdrs = col("topic", None), col("partition", None), col("headers", None)
        for i in range(n):
            yield OutRecord(_topic(topics[i], default_topic), _bytes(keys[i]), _bytes(values[i]), parts[i],
                            _headers(hdrs[i]))


def _all_null_or_empty(col: pa.Array | pa.ChunkedArray, lists: bool) -> bool:
    if col.null_count == len(col):
        return True
    if lists:
        return bool(pc.max(pc.fill_null(pc.list_value_length(col), 0)).as_py() == 0)
    return False


def arrow_runs(batch: pa.RecordBatch, default_topic: str | None, partitions_of: Callable[[str], int],
               max_bytes: int, rng: random.Random | None = None) -> list[tuple[str, int, EncodedRecords]] | None:
    """The batch as (topic, partition, framed run) in record order per partition, partitioned as
    the producer would (murmur2 of the key; null keys: one partition for the batch, KIP-480), or
    None when it needs the record-by-record path (per-row topics or headers)."""
    names = batch.schema.names
    if "topic" in names and not _all_null_or_empty(batch.column("topic"), lists=False):
        return None
    if "headers" in names and not _all_null_or_empty(batch.column("headers"), lists=True):
        return None
    n = batch.num_rows
    if n == 0:
        return []
    topic = _topic(None, default_topic)
    count = partitions_of(topic)
    keys = batch.column("key") if "key" in names else None
    values = batch.column("value")
    parts = batch.column("partition") if "partition" in names else pa.nulls(n, pa.int32())
    if parts.null_count and keys is not None:
        parts = pc.coalesce(parts, partitions_for_keys(keys, count))
    if parts.null_count:
        parts = pc.fill_null(parts, pa.scalar((rng or random).randrange(count), pa.int32()))
    low, high = pc.min_max(parts).values()
    if low.as_py() < 0 or high.as_py() >= count:
        raise ValueError(f"partition out of range for {topic} ({count} partitions): {low}..{high}")
    order = pc.sort_indices(parts)  # stable: each partition's records keep their order
    parts = parts.take(order)
    keys = keys.take(order) if keys is not None else None
    values = values.take(order)
    out: list[tuple[str, int, EncodedRecords]] = []
    runs = pc.run_end_encode(parts)
    start = 0
    for end, p in zip(runs.run_ends.to_pylist(), runs.values.to_pylist(), strict=True):
        k = keys.slice(start, end - start) if keys is not None else None
        out += [(topic, p, r) for r in encode(k, values.slice(start, end - start), max_bytes=max_bytes)]
        start = end
    return out
