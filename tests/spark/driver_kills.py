"""The orders job's driver, SIGKILLed at random points and restarted from its checkpoint, and the
check that its output is still exactly once: shared by the test (one broker, a few kills) and the
soak (three brokers, more kills, a broker killed too).

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
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from helpers import wait_until
from pipeline_support import checkpoint_batches, read_committed

from client import Consumer, TopicPartition
from pipeline.jobs.generate_orders import generate
from pipeline.jobs.model import customer_tier, expected_totals, make_order

SEED = 11
QUERIES = ("enriched", "totals")


@dataclass
class DriverKills:
    """One run of the orders job over `orders` orders, killed `kills` times, then finished."""

    bootstrap: str
    topic: str
    tmp: Path
    orders: int
    max_offsets_per_trigger: int
    seed: int = field(default_factory=lambda: random.randrange(1 << 30))
    points: list[str] = field(default_factory=list)
    restarts_s: list[float] = field(default_factory=list)  # driver start -> its first committed batch
    started_s: list[float] = field(default_factory=list)  # driver start -> its queries started (JVM, session)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.src, self.enriched, self.totals = self.topic, self.topic + "-enriched", self.topic + "-totals"
        self.ck, self.log = self.tmp / "ck", self.tmp / "driver.log"
        self.cmd = [sys.executable, "-m", "pipeline.jobs.orders", "--bootstrap", self.bootstrap,
                    "--checkpoint", str(self.ck), "--source-topic", self.src, "--enriched-topic", self.enriched,
                    "--totals-topic", self.totals, "--trigger", "available-now",
                    "--max-offsets-per-trigger", str(self.max_offsets_per_trigger),
                    "--transaction-timeout-ms", "20000"]

    def context(self) -> str:
        return f"kills at {self.points} (seed {self.seed})"

    def generate(self) -> None:
        asyncio.run(generate(self.bootstrap, self.src, seed=SEED, start=0, count=self.orders, txn_size=100,
                             abort_every=4, txn_id=f"{self.topic}-gen"))

    # ---- the driver --------------------------------------------------------------------------
    def start_driver(self) -> subprocess.Popen[bytes]:
        # A SIGKILLed driver cannot remove its scratch directories: keep them in the test's tmp dir.
        env = {**os.environ, "SPARK_LOCAL_DIRS": str(self.tmp / "spark-local")}
        with open(self.log, "ab") as out:
            out.write(f"===== driver start: {' '.join(self.cmd)}\n".encode())
            out.flush()
            proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=env)
        self._started = (time.monotonic(), self._commits())
        self._restart_seen = False
        self._queries_seen = False
        self._log_size = self.log.stat().st_size
        return proc

    def _commits(self) -> dict[str, int]:
        return {q: len(checkpoint_batches(self.ck / q)) for q in QUERIES}

    def _note_restart(self) -> None:
        """Time from the driver's start to its queries running (the job prints a line) and to the
        first micro-batch it committed, once per driver restarted from a checkpoint."""
        if self._restart_seen:
            return
        t0, before = self._started
        if not any(before.values()):  # a first start, not a restart from a checkpoint
            self._restart_seen = True
            return
        if not self._queries_seen:
            with open(self.log, "rb") as f:
                f.seek(self._log_size)
                if b"orders job running" in f.read():
                    self._queries_seen = True
                    self.started_s.append(time.monotonic() - t0)
        if any(n > before[q] for q, n in self._commits().items()):
            self._restart_seen = True
            self.restarts_s.append(time.monotonic() - t0)

    def kill_driver(self, proc: subprocess.Popen[bytes]) -> None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

        def gone() -> bool:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return True
            return False

        wait_until(gone, timeout=30, message="every process of the killed driver to exit")

    def _log_end(self) -> int:
        """Records written to the enriched topic so far, committed or not: a sink transaction in
        progress shows here."""
        async def ask() -> int:
            tps = [TopicPartition(self.enriched, 0), TopicPartition(self.enriched, 1)]
            async with Consumer(self.bootstrap, isolation_level="read_uncommitted", enable_auto_commit=False) as c:
                return sum((await c.end_offsets(tps)).values())
        return asyncio.run(ask())

    def kill_at_random_point(self, proc: subprocess.Popen[bytes], timeout: float = 240, *,
                             kill_driver: bool = True) -> str:
        """Wait for a random kill point, then SIGKILL the driver's process group (unless the caller
        kills something else there)."""
        done = len(checkpoint_batches(self.ck / "enriched"))
        kind = self.rng.choice(["planned", "writing", "committed"])
        cond: Callable[[], bool]
        if kind == "planned":  # the batch is in the offset log, its tasks are starting or running
            cond = (self.ck / "enriched" / "offsets" / str(done + self.rng.randint(0, 1))).exists
        elif kind == "committed":  # a batch just finished (the other query may be mid-batch)
            cond = (self.ck / "totals" / "commits" / str(done + self.rng.randint(0, 1))).exists
        else:  # records of an uncommitted sink transaction are in the output log
            base, grow = self._log_end(), self.rng.randint(1, 150)

            def cond() -> bool:
                return self._log_end() >= base + grow

        def ready() -> bool:
            assert proc.poll() is None, (f"driver exited early ({proc.returncode}), {self.context()}:\n"
                                         f"{self.log.read_text()[-4000:]}")
            self._note_restart()
            return bool(cond())

        wait_until(ready, timeout=timeout, interval=0.02, message=f"kill point {kind}, {self.context()}")
        if kill_driver:
            self.kill_driver(proc)
        self.points.append(kind)
        return kind

    def finish(self, timeout: float = 400) -> None:
        proc = self.start_driver()

        def ended() -> bool:
            self._note_restart()
            return proc.poll() is not None

        wait_until(ended, timeout=timeout, interval=0.2, message=f"the last run to finish, {self.context()}")
        assert proc.returncode == 0, f"{self.context()}\n{self.log.read_text()[-6000:]}"

    # ---- the verdict -------------------------------------------------------------------------
    def check_exactly_once(self) -> None:
        b, ctx = self.bootstrap, self.context()
        orders = [make_order(SEED, i) for i in range(self.orders)]
        enriched = [json.loads(r.value) for r in asyncio.run(read_committed(b, self.enriched))]
        counts = Counter(e["order_id"] for e in enriched)
        dupes = {k: n for k, n in counts.items() if n > 1}
        missing = {o.order_id for o in orders} - set(counts)
        assert not dupes and not missing and len(counts) == self.orders, (
            f"{ctx}: {len(dupes)} duplicated, {len(missing)} missing, "
            f"{len(set(counts) - {o.order_id for o in orders})} unexpected")
        by_id = {o.order_id: o for o in orders}
        for e in enriched:
            o = by_id[e["order_id"]]
            assert (e["amount_cents"], e["tier"], e["customer"]) == (o.amount_cents, customer_tier(o.customer),
                                                                    o.customer)

        # totals: complete mode emits every customer seen so far, once per committed micro-batch
        source = asyncio.run(read_committed(b, self.src))
        expected_rows = 0
        for ends in checkpoint_batches(self.ck / "totals").values():
            end = {int(p): o for p, o in ends[self.src].items()}
            expected_rows += len({json.loads(r.value)["customer"] for r in source if r.offset < end[r.partition]})
        totals = [json.loads(r.value) for r in asyncio.run(read_committed(b, self.totals))]
        assert len(totals) == expected_rows, f"{ctx}: totals rows != one snapshot per batch"
        last = {t["customer"]: (t["orders"], t["total_cents"]) for t in totals}  # one partition per customer
        assert last == expected_totals(orders)
