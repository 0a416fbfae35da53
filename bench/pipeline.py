"""Rows/s through the Spark pipeline: ketch source -> transform -> exactly-once ketch sink, local[2].

    python -m bench.pipeline [--orders 50000] [--bootstrap HOST:PORT] [--out bench/results-pipeline.json]

Without --bootstrap a Ketch broker subprocess is started (and stopped) for the run. The input is
the orders generator's stream (committed transactions, some aborted ones interleaved). Each
measured run is a streaming query with trigger availableNow over the whole input, from start()
to termination, on a SparkSession started beforehand (JVM start-up is not counted), once with
Arrow (source yields Arrow batches, sink is a DataSourceStreamArrowWriter) and once without
(tuples in, Rows out). Two transforms: `passthrough` (key, value unchanged: the cost of the
connector itself) and `enrich` (the orders job's JSON parse + broadcast join + to_json).
Each configuration runs --repeat times and the median is reported; the spread is kept in
`runs_rows_per_s` (a busy machine shows there). Correctness is checked after each run (output count at read_committed equals input count).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from client import Admin, Consumer, TopicPartition
from pipeline import local_session
from pipeline.jobs.generate_orders import generate
from pipeline.jobs.model import customers
from pipeline.jobs.orders import enriched, parse_orders

from .throughput import KetchBroker, log, machine_info


async def _committed_count(bootstrap: str, topic: str) -> int:
    async with Admin(bootstrap) as a:
        desc = await a.describe_topics([topic])
    tps = [TopicPartition(topic, p.partition) for p in desc[topic].partitions]
    async with Consumer(bootstrap, isolation_level="read_committed", enable_auto_commit=False,
                        auto_offset_reset="earliest") as c:
        c.assign(tps)
        end = await c.end_offsets(tps)
        for tp in tps:
            c.seek(tp, 0)
        n = 0
        while any([await c.position(tp) < end[tp] for tp in tps]):
            for recs in (await c.getmany(timeout_ms=500)).values():
                n += len(recs)
        return n


def _transform(spark: SparkSession, name: str, src: DataFrame) -> DataFrame:
    if name == "passthrough":
        return src.select("key", "value")
    dim = spark.createDataFrame(customers(), "customer string, tier string")
    return enriched(parse_orders(src), dim)


def run_once(spark: SparkSession, bootstrap: str, source: str, orders: int, transform: str,
             use_arrow: bool) -> dict[str, Any]:
    out = f"bench-out-{uuid.uuid4().hex[:8]}"
    asyncio.run(_create(bootstrap, out))
    arrow = str(use_arrow).lower()
    src = (spark.readStream.format("ketch").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
           .option("startingOffsets", "earliest").option("useArrow", arrow).load())
    with tempfile.TemporaryDirectory(prefix="ketch-bench-ck-") as ck:
        t0 = time.perf_counter()
        q = (_transform(spark, transform, src).writeStream.format("ketch")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", out).option("useArrow", arrow)
             .option("checkpointLocation", ck).trigger(availableNow=True).start())
        q.awaitTermination()
        elapsed = time.perf_counter() - t0
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    written = asyncio.run(_committed_count(bootstrap, out))
    if written != orders:
        raise RuntimeError(f"{transform}/arrow={use_arrow}: wrote {written} records for {orders} orders")
    result = {"transform": transform, "arrow": use_arrow, "rows": orders, "seconds": round(elapsed, 2),
              "rows_per_s": round(orders / elapsed)}
    log(f"{transform:12s} arrow={use_arrow!s:5s} {orders} rows in {elapsed:6.1f}s = {orders / elapsed:8.0f} rows/s")
    return result


async def _create(bootstrap: str, topic: str, partitions: int = 2) -> None:
    async with Admin(bootstrap) as a:
        await a.create_topic(topic, partitions)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--orders", type=int, default=50_000)
    ap.add_argument("--bootstrap", default=None, help="use this broker instead of starting one")
    ap.add_argument("--transforms", default="passthrough,enrich")
    ap.add_argument("--repeat", type=int, default=3, help="runs per configuration; the median is reported")
    ap.add_argument("--out", type=Path, default=Path("bench/results-pipeline.json"))
    args = ap.parse_args(argv)
    broker = None if args.bootstrap else KetchBroker(partitions=2)
    bootstrap = args.bootstrap or broker.bootstrap  # type: ignore[union-attr]
    try:
        source = f"bench-orders-{uuid.uuid4().hex[:8]}"
        asyncio.run(_create(bootstrap, source))
        t0 = time.perf_counter()
        asyncio.run(generate(bootstrap, source, seed=3, start=0, count=args.orders, txn_size=5000, abort_every=4,
                             txn_id=f"{source}-gen"))
        log(f"generated {args.orders} orders in {time.perf_counter() - t0:.1f}s")
        spark = local_session("ketch-bench")
        # warm-up: JIT, Python worker pool, first-query planning
        run_once(spark, bootstrap, source, args.orders, "passthrough", True)
        results = []
        for t in args.transforms.split(","):
            for arrow in (True, False):
                runs = [run_once(spark, bootstrap, source, args.orders, t, arrow) for _ in range(args.repeat)]
                best = sorted(runs, key=lambda r: r["rows_per_s"])[len(runs) // 2]
                results.append({**best, "runs_rows_per_s": [r["rows_per_s"] for r in runs]})
        spark.stop()
    finally:
        if broker is not None:
            broker.close()
    report = {"machine": machine_info(), "master": "local[2]", "orders": args.orders, "results": results}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
