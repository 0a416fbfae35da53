"""Rows/s through the Spark pipeline: ketch source -> transform -> exactly-once ketch sink, local[2].

    python -m bench.pipeline [--orders 50000] [--targets ketch,ketch-3] [--bootstrap HOST:PORT]
                             [--out bench/results-pipeline.json]

Targets: `ketch` is one broker subprocess, `ketch-3` three brokers in one quorum with every topic at
replication factor 3 and min.insync.replicas 2 (bench/cluster.py), measured one after the other in
the same run on the same SparkSession (started beforehand: JVM start-up is not counted); with
--bootstrap, that broker or cluster instead, as target `external`. The input is the orders
generator's stream (committed transactions, some aborted ones interleaved). Each measured run is a
streaming query with trigger availableNow over the whole input, from start() to termination, once
with Arrow (source yields Arrow batches, sink is a DataSourceStreamArrowWriter) and once without
(tuples in, Rows out). Two transforms: `passthrough` (key, value unchanged: the cost of the
connector itself) and `enrich` (the orders job's JSON parse + broadcast join + to_json).
Each target first runs --warmup unmeasured passthrough queries (the JVM's JIT keeps speeding
queries up for several). Each configuration runs --repeat times and the median is reported; the
spread is kept in `runs_rows_per_s` and the 1-minute load average at the start of each run in
`load_1m` (a busy machine shows there). Correctness is checked after each run (output count at read_committed
equals input count); a run that fails is counted in `failed_runs` with its error in `errors`, and
the median is of the runs that finished (`rows_per_s` null if none did). Per target, `overhead_s`
is the median time of the same passthrough query over --overhead-orders orders: what a query
costs whatever its size (Spark's query start-up, planning, the micro-batch's commit), which the
400,000-order figure includes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from client import Admin, Consumer, KafkaClientError, TopicPartition
from pipeline import local_session
from pipeline.jobs.generate_orders import generate
from pipeline.jobs.model import customers
from pipeline.jobs.orders import enriched, parse_orders

from .cluster import KetchCluster
from .targets import KetchBroker, Target, log
from .throughput import machine_info

TARGETS = ("ketch", "ketch-3")
PARTITIONS = 2


class External(Target):
    """A broker or cluster someone else runs (--bootstrap): topics with its default replication."""

    name = "external"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.partitions = PARTITIONS

    def prepare_topic(self, topic: str) -> None:
        async def create() -> None:
            async with Admin(self.bootstrap) as a:
                await a.create_topic(topic, self.partitions)

        asyncio.run(create())

    def close(self) -> None:
        pass


def parse_targets(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names or any(n not in TARGETS for n in names):
        raise argparse.ArgumentTypeError(f"targets are a comma-separated subset of {','.join(TARGETS)}")
    return [t for t in TARGETS if t in names]


def make_target(name: str) -> Target:
    if name == "ketch":
        return KetchBroker(partitions=PARTITIONS)
    return KetchCluster(PARTITIONS, size=3, min_insync=2)


async def _committed_count(bootstrap: str, topic: str, settle_s: float = 60.0) -> int:
    """Records visible at read_committed once every transaction on the topic is decided and its
    markers written: a commit returns before the markers land (on three brokers, visibly later)."""
    async with Admin(bootstrap) as a:
        desc = await a.describe_topics([topic])
    tps = [TopicPartition(topic, p.partition) for p in desc[topic].partitions]
    async with Consumer(bootstrap, isolation_level="read_uncommitted", enable_auto_commit=False) as raw, \
            Consumer(bootstrap, isolation_level="read_committed", enable_auto_commit=False,
                     auto_offset_reset="earliest") as c:
        c.assign(tps)
        deadline = time.monotonic() + settle_s
        while (end := await c.end_offsets(tps)) != await raw.end_offsets(tps) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)  # polling interval while the last markers are written
        for tp in tps:
            c.seek(tp, 0)
        n = 0
        while any([await c.position(tp) < end[tp] for tp in tps]):
            for batches in (await c.getmany_batches(timeout_ms=500)).values():
                n += sum(h.records_count for _, h in batches.batches)
        return n


def _transform(spark: SparkSession, name: str, src: DataFrame) -> DataFrame:
    if name == "passthrough":
        return src.select("key", "value")
    dim = spark.createDataFrame(customers(), "customer string, tier string")
    return enriched(parse_orders(src), dim)


def run_once(spark: SparkSession, target: Target, source: str, orders: int, transform: str,
             use_arrow: bool) -> dict[str, Any]:
    bootstrap = target.bootstrap
    out = f"bench-out-{uuid.uuid4().hex[:8]}"
    target.prepare_topic(out)
    arrow = str(use_arrow).lower()
    load = os.getloadavg()[0]
    src = (spark.readStream.format("ketch").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
           .option("startingOffsets", "earliest").option("useArrow", arrow).load())
    with tempfile.TemporaryDirectory(prefix="ketch-bench-ck-") as ck:
        t0 = time.perf_counter()
        q = (_transform(spark, transform, src).writeStream.format("ketch")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", out).option("useArrow", arrow)
             .option("checkpointLocation", ck).trigger(availableNow=True).start())
        try:
            q.awaitTermination()
        except Exception as exc:
            raise RuntimeError(f"{target.name} {transform}/arrow={use_arrow} failed; the brokers' logs end with:\n"
                               f"{target.log_tail()}") from exc
        elapsed = time.perf_counter() - t0
    written = asyncio.run(_committed_count(bootstrap, out))
    if written != orders:
        raise RuntimeError(f"{target.name} {transform}/arrow={use_arrow}: wrote {written} records for {orders} orders")
    log(f"{target.name:8s} {transform:12s} arrow={use_arrow!s:5s} {orders} rows in {elapsed:6.1f}s = "
        f"{orders / elapsed:8.0f} rows/s (load {load:.1f})")
    return {"target": target.name, "transform": transform, "arrow": use_arrow, "rows": orders,
            "seconds": round(elapsed, 2), "rows_per_s": round(orders / elapsed), "load_1m": round(load, 2)}


def _source(target: Target, orders: int, failures: list[str], attempts: int = 3) -> str:
    """A new topic holding the orders; a generation that fails is recorded and done again in a new
    topic (a half-written input would not be the same input)."""
    for attempt in range(1, attempts + 1):
        source = f"bench-orders-{uuid.uuid4().hex[:8]}"
        target.prepare_topic(source)
        t0 = time.perf_counter()
        try:
            asyncio.run(generate(target.bootstrap, source, seed=3, start=0, count=orders, txn_size=5000,
                                 abort_every=4, txn_id=f"{source}-gen"))
        except KafkaClientError as exc:
            failures.append(f"generating the input: {exc!r}"[:300])
            log(f"{target.name}: generating {orders} orders failed (attempt {attempt}): {exc!r}")
            if attempt == attempts:
                raise
            continue
        log(f"{target.name}: generated {orders} orders in {time.perf_counter() - t0:.1f}s")
        return source
    raise AssertionError("unreachable")


def measure(spark: SparkSession, target: Target, args: argparse.Namespace
            ) -> tuple[list[dict[str, Any]], Any, list[str]]:
    """Every configuration on one target: (results, overhead_s, input generation failures)."""
    failures: list[str] = []
    source = _source(target, args.orders, failures)
    # warm-up: the Python worker pool, first-query planning, the workers' kept clients, and the
    # JVM's JIT, which goes on speeding queries up for several more (one warm-up run left the
    # first measured runs of a target 1.5x slower than its fifth)
    for _ in range(args.warmup):
        run_once(spark, target, source, args.orders, "passthrough", True)
    overhead = None
    if args.overhead_orders:
        small = _source(target, args.overhead_orders, failures)
        times = [run_once(spark, target, small, args.overhead_orders, "passthrough", True)["seconds"]
                 for _ in range(args.repeat)]
        overhead = statistics.median(times)
    results = []
    for t in args.transforms.split(","):
        for arrow in (True, False):
            runs, errors = [], []
            for _ in range(args.repeat):
                try:
                    runs.append(run_once(spark, target, source, args.orders, t, arrow))
                except RuntimeError as exc:  # reported with the figures, not hidden: see `errors`
                    log(f"{target.name} {t} arrow={arrow} FAILED: {_first_error(exc)}\n{exc}"[:6000])
                    errors.append(_first_error(exc))
            entry: dict[str, Any] = {"target": target.name, "transform": t, "arrow": arrow, "rows": args.orders,
                                     "rows_per_s": None}
            if runs:
                best = sorted(runs, key=lambda r: r["rows_per_s"])[len(runs) // 2]
                entry = {**best, "runs_rows_per_s": [r["rows_per_s"] for r in runs],
                         "load_1m": [r["load_1m"] for r in runs]}
            if errors:
                entry["failed_runs"] = len(errors)
                entry["errors"] = errors
            results.append(entry)
    return results, overhead, failures


def _first_error(exc: BaseException) -> str:
    """The line that says what failed (a Python worker's exception inside Spark's long report)."""
    text = f"{exc.__cause__ or exc}"
    lines = [ln.strip() for ln in text.splitlines() if "Error" in ln and not ln.strip().startswith("at ")]
    return (lines[-1] if lines else text.splitlines()[0] if text else repr(exc))[:300]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--orders", type=int, default=50_000)
    ap.add_argument("--targets", type=parse_targets, default=parse_targets("ketch,ketch-3"), metavar="T1,T2",
                    help=f"a subset of {','.join(TARGETS)} (default both): one broker, three brokers RF 3")
    ap.add_argument("--bootstrap", default=None, help="use this broker or cluster instead (target 'external')")
    ap.add_argument("--transforms", default="passthrough,enrich")
    ap.add_argument("--repeat", type=int, default=3, help="runs per configuration; the median is reported")
    ap.add_argument("--warmup", type=int, default=3, help="unmeasured passthrough runs per target first")
    ap.add_argument("--overhead-orders", type=int, default=1_000,
                    help="orders for the per-query overhead runs (0: skip them)")
    ap.add_argument("--out", type=Path, default=Path("bench/results-pipeline.json"))
    args = ap.parse_args(argv)
    names = ["external"] if args.bootstrap else args.targets
    spark = local_session("ketch-bench")
    results: list[dict[str, Any]] = []
    per_target: dict[str, Any] = {}
    try:
        for name in names:
            target = External(args.bootstrap) if args.bootstrap else make_target(name)
            try:
                got, overhead, failures = measure(spark, target, args)
                results += got
                per_target[name] = {"overhead_s": overhead, "input_failures": failures,
                                    **target.replication_report()}
            finally:
                target.close()
    finally:
        spark.stop()
    report = {"machine": machine_info(), "master": "local[2]", "orders": args.orders, "warmup_runs": args.warmup,
              "targets": per_target,
              "results": results}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
