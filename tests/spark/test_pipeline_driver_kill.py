"""The orders job, its Spark driver SIGKILLed at random points and restarted from its checkpoint.

The driver is a separate process group (Python driver, its JVM, the Python workers), killed as a
whole, as a machine or container loss would. After the kills, one last run finishes the input
(availableNow). Then, at read_committed: every committed order is in the enriched stream exactly
once, and the totals stream holds exactly one full snapshot per committed micro-batch, the last one
equal to totals computed directly from the committed orders.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import wait_until
from pipeline_support import checkpoint_batches, create_topics, read_committed

from client import Consumer, TopicPartition
from pipeline.jobs.generate_orders import generate
from pipeline.jobs.model import customer_tier, expected_totals, make_order

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

SEED = 11
ORDERS = 800
KILLS = 3


def _driver(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    # A SIGKILLed driver cannot remove its scratch directories: keep them in the test's tmp dir.
    env = {**os.environ, "SPARK_LOCAL_DIRS": str(log.parent / "spark-local")}
    with open(log, "ab") as out:
        out.write(f"===== driver start: {' '.join(cmd)}\n".encode())
        out.flush()
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)

    def gone() -> bool:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(gone, timeout=30, message="every process of the killed driver to exit")


async def _log_end(bootstrap: str, topic: str) -> int:
    """Records written to `topic` so far, committed or not: a sink transaction in progress shows here."""
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    async with Consumer(bootstrap, isolation_level="read_uncommitted", enable_auto_commit=False) as c:
        return sum((await c.end_offsets(tps)).values())


def test_orders_job_is_exactly_once_across_driver_kills(broker, topic: str, tmp_path: Path) -> None:
    b = broker.bootstrap
    src, enriched_t, totals_t = topic, topic + "-enriched", topic + "-totals"
    asyncio.run(create_topics(b, [src, enriched_t, totals_t]))
    asyncio.run(generate(b, src, seed=SEED, start=0, count=ORDERS, txn_size=100, abort_every=4,
                         txn_id=f"{topic}-gen"))
    ck, log = tmp_path / "ck", tmp_path / "driver.log"
    cmd = [sys.executable, "-m", "pipeline.jobs.orders", "--bootstrap", b, "--checkpoint", str(ck),
           "--source-topic", src, "--enriched-topic", enriched_t, "--totals-topic", totals_t,
           "--trigger", "available-now", "--max-offsets-per-trigger", "120", "--transaction-timeout-ms", "20000"]
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    points = []
    for _ in range(KILLS):
        proc = _driver(cmd, log)
        done = len(checkpoint_batches(ck / "enriched"))
        kind = rng.choice(["planned", "writing", "committed"])
        if kind == "planned":  # the batch is in the offset log, its tasks are starting or running
            target = ck / "enriched" / "offsets" / str(done + rng.randint(0, 1))
            cond = target.exists
        elif kind == "committed":  # a batch just finished (the other query may be mid-batch)
            target = ck / "totals" / "commits" / str(done + rng.randint(0, 1))
            cond = target.exists
        else:  # records of an uncommitted sink transaction are in the output log
            base = asyncio.run(_log_end(b, enriched_t))
            grow = rng.randint(1, 150)

            def cond(base: int = base, grow: int = grow) -> bool:
                return asyncio.run(_log_end(b, enriched_t)) >= base + grow

        def ready(cond: Callable[[], bool] = cond, proc: subprocess.Popen[bytes] = proc) -> bool:
            assert proc.poll() is None, f"driver exited early ({proc.returncode}):\n{log.read_text()[-4000:]}"
            return bool(cond())

        wait_until(ready, timeout=240, interval=0.02, message=f"kill point {kind} (seed {seed})")
        _kill_group(proc)
        points.append(kind)

    proc = _driver(cmd, log)
    wait_until(lambda: proc.poll() is not None, timeout=400, interval=0.2,
               message=f"the last run to finish (kills at {points}, seed {seed})")
    assert proc.returncode == 0, f"kills at {points}, seed {seed}\n{log.read_text()[-6000:]}"

    orders = [make_order(SEED, i) for i in range(ORDERS)]
    enriched = [json.loads(r.value) for r in asyncio.run(read_committed(b, enriched_t))]
    counts = Counter(e["order_id"] for e in enriched)
    dupes = {k: n for k, n in counts.items() if n > 1}
    missing = {o.order_id for o in orders} - set(counts)
    assert not dupes and not missing and len(counts) == ORDERS, (
        f"kills at {points} (seed {seed}): {len(dupes)} duplicated, {len(missing)} missing, "
        f"{len(set(counts) - {o.order_id for o in orders})} unexpected")
    by_id = {o.order_id: o for o in orders}
    for e in enriched:
        o = by_id[e["order_id"]]
        assert (e["amount_cents"], e["tier"], e["customer"]) == (o.amount_cents, customer_tier(o.customer),
                                                                o.customer)

    # totals: complete mode emits every customer seen so far, once per committed micro-batch
    source = asyncio.run(read_committed(b, src))
    batches = checkpoint_batches(ck / "totals")
    expected_rows = 0
    for ends in batches.values():
        end = {int(p): o for p, o in ends[src].items()}
        expected_rows += len({json.loads(r.value)["customer"] for r in source if r.offset < end[r.partition]})
    totals = [json.loads(r.value) for r in asyncio.run(read_committed(b, totals_t))]
    assert len(totals) == expected_rows, f"kills at {points} (seed {seed}): totals rows != one snapshot per batch"
    last = {t["customer"]: (t["orders"], t["total_cents"]) for t in totals}  # one partition per customer
    assert last == expected_totals(orders)
