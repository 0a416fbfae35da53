"""The orders job in the test process's SparkSession: two streaming queries started together.

The queries must not share a `ketch` registration: Spark lets every streaming source add keys to
its registration's (unsynchronised) environment-variable map when the query starts, and two
queries doing that at once can corrupt the map so that every task fails to deserialize
(java.io.OptionalDataException). That race is rare and cannot be forced from outside, so the
test checks the property that rules it out (distinct maps), then the job's output.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pipeline_support import create_topics, read_committed_sync
from pyspark.sql import SparkSession

from pipeline.jobs import orders as orders_job
from pipeline.jobs.generate_orders import generate
from pipeline.jobs.model import expected_totals, make_order

pytestmark = pytest.mark.spark

SEED = 5
ORDERS = 300


def _registration_env(spark: SparkSession, jsession: Any) -> int:
    """Identity of the environment map of the `ketch` registration a (JVM) session holds."""
    env = jsession.sessionState().dataSourceManager().lookupDataSource("ketch").dataSourceCls().envVars()
    return int(spark.sparkContext._jvm.java.lang.System.identityHashCode(env))  # type: ignore[union-attr]


def test_orders_job_queries_have_their_own_registration_and_exact_output(
        spark: SparkSession, module_broker, topic: str, tmp_path: Path) -> None:
    b = module_broker.bootstrap
    src, enriched_t, totals_t = topic, topic + "-enriched", topic + "-totals"
    asyncio.run(create_topics(b, [src, enriched_t, totals_t]))
    asyncio.run(generate(b, src, seed=SEED, start=0, count=ORDERS, txn_size=50, abort_every=3,
                         txn_id=f"{topic}-gen"))
    queries = orders_job.start(spark, bootstrap=b, checkpoint=tmp_path / "ck", source_topic=src,
                               enriched_topic=enriched_t, totals_topic=totals_t, max_offsets_per_trigger=150,
                               available_now=True, transaction_timeout_ms=20_000)
    envs = {_registration_env(spark, q._jsq.sparkSession()) for q in queries}
    ours = _registration_env(spark, spark._jsparkSession)
    for q in queries:
        q.awaitTermination(300)
        assert not q.isActive, f"{q.name} did not finish within 300s"
        assert q.exception() is None, q.exception()
    assert len(envs) == len(queries) and ours not in envs, "queries share a ketch registration"

    orders = [make_order(SEED, i) for i in range(ORDERS)]
    enriched = Counter(json.loads(r.value)["order_id"] for r in read_committed_sync(b, enriched_t))
    assert enriched == Counter(o.order_id for o in orders)
    last = {t["customer"]: (t["orders"], t["total_cents"])
            for t in (json.loads(r.value) for r in read_committed_sync(b, totals_t))}
    assert last == expected_totals(orders)

