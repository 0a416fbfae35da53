"""What a sink task sends: Spark rows or Arrow batches turned into (topic, key, value, partition, headers).

The input columns are those of Spark's Kafka sink: `value` (required), `key`, `topic` (else the
`topic` option), `partition` (else the producer's partitioner on the key) and `headers`. Keys and
values may be binary or string (strings are sent as UTF-8).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import pyarrow as pa
from pyspark.sql import Row
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

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
