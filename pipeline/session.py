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


def query_session(spark: SparkSession) -> SparkSession:
    """A session of its own for one streaming query that reads `ketch`, sharing `spark`'s SparkContext.

    Spark (4.x) hands every function made from a registered Python data source the registration's
    one java.util.HashMap of worker environment variables, and each streaming source's runner adds
    keys to that map when its query starts. Two queries starting at once in one session therefore
    put into the same unsynchronised HashMap from two threads; when both insert the same new key
    its size count ends up one too high, every task serialized from then on carries a HashMap that
    cannot be read back, and both queries die with java.io.OptionalDataException. A registration
    per query (a new session each) means no two threads ever write one map.
    """
    session = spark.newSession()
    jvm_sessions = spark.sparkContext._jvm.org.apache.spark.sql.SparkSession  # type: ignore[union-attr]
    previous = jvm_sessions.getActiveSession()
    # Spark refuses a registration whose name the *active* session already resolves, so the new
    # session is made active (on this thread's JVM peer) while `ketch` is registered in it.
    jvm_sessions.setActiveSession(session._jsparkSession)
    try:
        register(session)
    finally:
        if previous.isDefined():
            jvm_sessions.setActiveSession(previous.get())
        else:
            jvm_sessions.clearActiveSession()
    return session


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
