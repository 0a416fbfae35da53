"""A SparkSession set up for Ketch pipelines: the `ketch` data source registered, workers on our Python.

Spark starts its Python workers with `python3` from PATH unless told otherwise; they must run the
interpreter that has Ketch's client and pyarrow installed, i.e. this one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from .datasource import KetchDataSource

LOCAL_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    # A micro-batch's Python data-source planning and the tasks' workers are reused between
    # batches instead of forked per batch.
    "spark.python.worker.reuse": "true",
    "spark.sql.streaming.stopActiveRunOnRestart": "true",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -Xss4m",
}


def register(spark: SparkSession) -> SparkSession:
    """Make `format("ketch")` available in `spark` (idempotent)."""
    spark.dataSource.register(KetchDataSource)
    return spark


def local_session(app: str = "ketch-pipeline", master: str = "local[2]",
                  conf: Mapping[str, str] | None = None) -> SparkSession:
    """A local SparkSession for jobs, tests and benchmarks (one per process)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app).master(master)
    for k, v in {**LOCAL_DEFAULTS, **(conf or {})}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return register(spark)
