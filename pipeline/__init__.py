"""Ketch's Spark pipeline: the `ketch` PySpark data source (batch and streaming read, batch and
exactly-once streaming write, built on Ketch's client) and the jobs in pipeline/jobs/.

    from pipeline import local_session
    spark = local_session()
    df = spark.readStream.format("ketch").option("kafka.bootstrap.servers", "localhost:9092") \\
        .option("subscribe", "orders").load()

Guarantees and limits: docs/pipeline.md.
"""

from .datasource import KetchDataSource
from .schema import SOURCE_SCHEMA
from .session import local_session, query_session, register

__all__ = ["SOURCE_SCHEMA", "KetchDataSource", "local_session", "query_session", "register"]
