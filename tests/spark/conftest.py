"""Spark fixtures for tests/spark: one local[2] SparkSession for the whole run.

Starting a JVM costs tens of seconds on a busy 2-core machine, so the session is shared by every
in-process Spark test; tests isolate themselves with unique topics and checkpoint directories.
Tests that need a driver they can SIGKILL start their own driver process instead.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from pipeline import local_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = local_session("ketch-tests", conf={"spark.sql.streaming.minBatchesToRetain": "100"})
    yield session
    session.stop()
