"""Bundled client vs confluent-kafka on the same Ketch broker, in the same run.

    python -m bench.client [--messages N] [--out bench/client-results.json]

Scenarios (each client, in turn, against one Ketch broker subprocess):
  produce   N 100-byte messages, acks=all, idempotent, linger 5 ms, no compression; time until
            every delivery is acknowledged
  consume   read the N messages from the beginning (assign, read_committed)
Figures are messages per second; nothing here is asserted (see docs/bench.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
import uuid
from pathlib import Path

import confluent_kafka
import uvloop

from bench.throughput import KetchBroker, log
from client import Admin, Consumer, Producer, TopicPartition

PARTITIONS = 4
SIZE = 100
QUIET = {"log_level": 3}


async def ours_produce(bs: str, topic: str, n: int) -> float:
    value = b"x" * SIZE
    async with Producer(bs, linger_ms=5, batch_size=65536) as p:
        t = time.perf_counter()
        # like the confluent loop: no per-message wait, then flush until everything is acknowledged
        # (gathering n futures would measure asyncio.gather, not the client: ~1.8x slower)
        for _ in range(n):
            await p.send(topic, value)
        await p.flush()
        return n / (time.perf_counter() - t)


def confluent_produce(bs: str, topic: str, n: int) -> float:
    p = confluent_kafka.Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, **QUIET})
    value = b"x" * SIZE
    t = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    return n / (time.perf_counter() - t)


async def ours_consume(bs: str, topic: str, n: int) -> float:
    async with Consumer(bs, isolation_level="read_committed", auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        t = time.perf_counter()
        got = 0
        while got < n:
            for recs in (await c.getmany(timeout_ms=1000)).values():
                got += len(recs)
        return n / (time.perf_counter() - t)


def confluent_consume(bs: str, topic: str, n: int) -> float:
    c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": uuid.uuid4().hex,
                                  "isolation.level": "read_committed", "auto.offset.reset": "earliest", **QUIET})
    c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    t = time.perf_counter()
    got = 0
    while got < n:
        for m in c.consume(10_000, 1.0):
            if not m.error():
                got += 1
    rate = n / (time.perf_counter() - t)
    c.close()
    return rate


async def run(n: int) -> dict[str, object]:
    broker = KetchBroker(PARTITIONS)
    try:
        bs = broker.bootstrap
        out: dict[str, object] = {}
        for who in ("ketch-client", "confluent-kafka"):
            topic = f"bench-{who}-{uuid.uuid4().hex[:6]}"
            async with Admin(bs) as admin:
                await admin.create_topic(topic, PARTITIONS)
            log(f"{who}: produce {n}")
            prod = await ours_produce(bs, topic, n) if who == "ketch-client" else await asyncio.to_thread(
                confluent_produce, bs, topic, n)
            log(f"{who}: consume {n}")
            cons = await ours_consume(bs, topic, n) if who == "ketch-client" else await asyncio.to_thread(
                confluent_consume, bs, topic, n)
            out[who] = {"produce_msgs_per_s": round(prod), "consume_msgs_per_s": round(cons)}
        return out
    finally:
        broker.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--out", type=Path, default=Path("bench/client-results.json"))
    args = ap.parse_args()
    results = uvloop.run(run(args.messages))  # the loop Ketch itself runs on
    ours, theirs = results["ketch-client"], results["confluent-kafka"]
    assert isinstance(ours, dict) and isinstance(theirs, dict)
    results["ratio_ketch_client_over_confluent"] = {
        k: round(ours[k] / theirs[k], 3) for k in ours}
    results["setup"] = {"messages": args.messages, "message_bytes": SIZE, "partitions": PARTITIONS,
                        "python": sys.version.split()[0], "machine": platform.machine(),
                        "confluent_kafka": str(confluent_kafka.version())}
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
