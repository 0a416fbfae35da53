"""The orders job: orders in, an enriched order stream and per-customer running totals out, exactly once.

    python -m pipeline.jobs.orders --bootstrap localhost:9092 --checkpoint ./checkpoints/orders

Two streaming queries over the same input topic (each with its own checkpoint and query id):

* enriched: every committed order once, with its amount and the customer's tier (a stream-static
  join with the customer dimension), keyed by order id -> `orders-enriched`;
* totals: per customer, order count and total amount, all customers re-emitted after every
  micro-batch (complete mode; the state lives in Spark's checkpoint), keyed by customer -> `customer-totals`.

Both read at read_committed and write through the exactly-once sink, so after any number of
crashes and restarts from the checkpoint every order appears once in `orders-enriched`, and
`customer-totals` holds exactly one snapshot per committed micro-batch, the last one equal to the
totals of all committed orders.
`--trigger available-now` processes what is there and exits; the default keeps running.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from ..checkpoint import remove_incomplete_writes
from ..session import local_session, query_session
from .generate_orders import TOPICS
from .model import customers

ORDER_SCHEMA = StructType([
    StructField("order_id", StringType()),
    StructField("customer", StringType()),
    StructField("sku", StringType()),
    StructField("qty", IntegerType()),
    StructField("unit_price_cents", LongType()),
    StructField("ts", LongType()),
])


def parse_orders(raw: DataFrame) -> DataFrame:
    """Kafka rows -> typed orders (JSON parsing stays in the JVM: no Python UDF on the hot path)."""
    return (raw.select(F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o"))
            .select("o.*")
            .withColumn("amount_cents", F.col("qty") * F.col("unit_price_cents")))


def enriched(orders: DataFrame, dim: DataFrame) -> DataFrame:
    joined = orders.join(F.broadcast(dim), "customer", "left")
    return joined.select(
        F.col("order_id").cast("binary").alias("key"),
        F.to_json(F.struct("order_id", "customer", "tier", "sku", "qty", "unit_price_cents", "amount_cents",
                           "ts")).alias("value"),
    )


def totals(orders: DataFrame) -> DataFrame:
    agg = orders.groupBy("customer").agg(F.count("*").alias("orders"), F.sum("amount_cents").alias("total_cents"))
    return agg.select(F.col("customer").cast("binary").alias("key"),
                      F.to_json(F.struct("customer", "orders", "total_cents")).alias("value"))


def start(spark: SparkSession, *, bootstrap: str, checkpoint: Path, source_topic: str = TOPICS["orders"],
          enriched_topic: str = TOPICS["enriched"], totals_topic: str = TOPICS["totals"],
          max_offsets_per_trigger: int | None = None, available_now: bool = False,
          use_arrow: bool = True, transaction_timeout_ms: int = 60_000) -> list[StreamingQuery]:
    """Start both queries, each in a session of its own (see query_session); returns them running."""
    for name in ("enriched", "totals"):
        remove_incomplete_writes(checkpoint / name)
    queries = []
    for name, topic, mode in (("enriched", enriched_topic, "append"), ("totals", totals_topic, "complete")):
        session = query_session(spark)
        reader = (session.readStream.format("ketch").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", source_topic).option("startingOffsets", "earliest")
                  .option("useArrow", str(use_arrow).lower()))
        if max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
        orders = parse_orders(reader.load())
        if name == "enriched":
            df = enriched(orders, session.createDataFrame(customers(), "customer string, tier string"))
        else:
            df = totals(orders)
        w = (df.writeStream.queryName(f"orders-{name}").format("ketch").outputMode(mode)
             .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
             .option("useArrow", str(use_arrow).lower())
             .option("transactionTimeoutMs", str(transaction_timeout_ms))
             .option("checkpointLocation", str(checkpoint / name)))
        w = w.trigger(availableNow=True) if available_now else w.trigger(processingTime="1 second")
        queries.append(w.start())
    return queries


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default="localhost:9092")
    ap.add_argument("--checkpoint", type=Path, default=Path("checkpoints/orders"))
    ap.add_argument("--source-topic", default=TOPICS["orders"])
    ap.add_argument("--enriched-topic", default=TOPICS["enriched"])
    ap.add_argument("--totals-topic", default=TOPICS["totals"])
    ap.add_argument("--max-offsets-per-trigger", type=int, default=None)
    ap.add_argument("--trigger", choices=("continuous", "available-now"), default="continuous")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--transaction-timeout-ms", type=int, default=60_000,
                    help="how long a crashed task's open transaction can hold back read_committed readers")
    args = ap.parse_args(argv)
    spark = local_session("ketch-orders", master=args.master)
    queries = start(spark, bootstrap=args.bootstrap, checkpoint=args.checkpoint, source_topic=args.source_topic,
                    enriched_topic=args.enriched_topic, totals_topic=args.totals_topic,
                    max_offsets_per_trigger=args.max_offsets_per_trigger,
                    available_now=args.trigger == "available-now",
                    transaction_timeout_ms=args.transaction_timeout_ms)
    print(f"orders job running: {[q.name for q in queries]}, checkpoint {args.checkpoint}", flush=True)
    for q in queries:
        q.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
