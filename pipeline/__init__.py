"""Ketch's Spark pipeline: the `ketch` PySpark data source (batch and streaming read, batch and
exactly-once streaming write, built on Ketch's client) and the jobs in pipeline/jobs/.

    from pipeline import local_session
    spark = local_session()
    df = spark.readStream.format("ketch").option("kafka.bootstrap.servers", "localhost:9092") \\
        .option("subscribe", "orders").load()

Guarantees and limits: docs/pipeline.md.

The names are imported on first use (PEP 562): Spark's streaming source runner, a fresh process
per query, imports this package to unpickle the data source and needs only its reading half.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .datasource import KetchDataSource
    from .schema import SOURCE_SCHEMA
    from .session import local_session, query_session, register

_MODULE_OF = {"KetchDataSource": "datasource", "SOURCE_SCHEMA": "schema", "local_session": "session",
              "query_session": "session", "register": "session"}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


__all__ = ["SOURCE_SCHEMA", "KetchDataSource", "local_session", "query_session", "register"]
