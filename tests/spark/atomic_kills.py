"""A batch-atomic query (atomic_job.py) whose driver is SIGKILLed at chosen or random points and
restarted from its checkpoint, watched throughout by a read_committed reader (atomic_support.py):
shared by the default-suite test and the soak.

The points, per micro-batch: while its tasks write ("writing": records beyond the output's last
stable offset), after every task prepared and the driver took the transactions over ("taken
over"), after the driver recorded its decision ("decided"), between the driver's commits
("completed": one committed, the others prepared), after the batch became readable ("gate ended")
and after Spark recorded it in its commit log ("logged"). The points inside the driver's commit are
reached by the job itself (atomic_job.py kills its driver there); the others are watched from here.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from atomic_support import AtomicVerdict, LsoWatcher
from driver_kills import DriverKills
from helpers import wait_until
from pipeline_support import checkpoint_batches, produce_with_aborts

from client import Consumer, TopicPartition

IN_DRIVER = ("taken over", "decided", "completed", "gate ended")
WATCHED = ("writing", "logged")
POINTS = IN_DRIVER + WATCHED
JOB = Path(__file__).resolve().parent / "atomic_job.py"


@dataclass
class AtomicKills(DriverKills):
    """`orders` is the number of input records here (committed; aborted ones are interleaved)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.out = self.topic + "-out"
        self.kill_log = self.tmp / "kills.log"
        self.base_cmd = [sys.executable, str(JOB), "--bootstrap", self.bootstrap, "--checkpoint", str(self.ck),
                         "--source", self.src, "--out", self.out,
                         "--max-offsets-per-trigger", str(self.max_offsets_per_trigger)]
        self.cmd = self.base_cmd
        self.watcher = LsoWatcher(self.bootstrap, self.out, 2)

    def generate(self) -> None:
        asyncio.run(produce_with_aborts(self.bootstrap, self.src, self.orders, txn_size=30, abort_every=3))
        self.watcher.start()

    def _commits(self) -> dict[str, int]:
        return {"copy": len(checkpoint_batches(self.ck))}

    def _log_end(self) -> int:
        async def ask() -> int:
            tps = [TopicPartition(self.out, 0), TopicPartition(self.out, 1)]
            async with Consumer(self.bootstrap, isolation_level="read_uncommitted", enable_auto_commit=False) as c:
                return sum((await c.end_offsets(tps)).values())
        return asyncio.run(ask())

    def run_and_kill(self, point: str | None = None, timeout: float = 240) -> str:
        """Start a driver and kill it at `point` (random if None) of the next micro-batch or the
        one after; returns the point."""
        point = point or self.rng.choice(POINTS)
        batch = len(checkpoint_batches(self.ck)) + self.rng.randint(0, 1)
        if point in IN_DRIVER:
            self.cmd = [*self.base_cmd, "--kill-at", point, "--kill-batch", str(batch),
                        "--kill-log", str(self.kill_log)]
            proc = self.start_driver()
            self.cmd = self.base_cmd
            wait_until(lambda: self._note_restart() or proc.poll() is not None, timeout=timeout, interval=0.2,
                       message=f"the driver to kill itself at {point} of batch {batch}, {self.context()}")
            killed = self.kill_log.read_text().splitlines() if self.kill_log.exists() else []
            assert proc.returncode == -9 and f"{point} {batch}" in killed, (
                f"the driver ended ({proc.returncode}) without reaching {point} of batch {batch}, {self.context()}:\n"
                f"{self.log.read_text()[-4000:]}")
            self._wait_gone(proc)
            self.points.append(f"{point}@{batch}")
        else:
            self.at_watched_point(self.start_driver(), point, batch, timeout)
        return point

    def at_watched_point(self, proc: subprocess.Popen[bytes], point: str | None = None, batch: int | None = None,
                         timeout: float = 240, *, kill_driver: bool = True) -> str:
        """Wait for a point watched from here (random if None) of the next micro-batch or the one
        after, then SIGKILL the driver (unless the caller kills something else there)."""
        point = point or self.rng.choice(WATCHED)
        if batch is None:
            batch = len(checkpoint_batches(self.ck)) + self.rng.randint(0, 1)
        if point == "logged":
            def cond() -> bool:
                return (self.ck / "commits" / str(batch)).exists()
        else:
            base, grow = self._log_end(), self.rng.randint(1, 80)

            def cond() -> bool:
                return self._log_end() >= base + grow

        def ready() -> bool:
            assert proc.poll() is None, (f"driver exited early ({proc.returncode}), {self.context()}:\n"
                                         f"{self.log.read_text()[-4000:]}")
            self._note_restart()
            return bool(cond())

        wait_until(ready, timeout=timeout, interval=0.02, message=f"kill point {point}, {self.context()}")
        if kill_driver:
            self.kill_driver(proc)
        self.points.append(f"{point}@{batch}")
        return point

    def _wait_gone(self, proc: subprocess.Popen[bytes]) -> None:
        """The driver killed itself: wait until nothing of its process group is left."""
        def gone() -> bool:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return True
            return False

        wait_until(gone, timeout=30, message="every process of the killed driver to exit")

    def verdict(self) -> AtomicVerdict:
        """Stop watching; the output and what the reader could see, judged (raises on a failure)."""
        seen = self.watcher.stop()
        v = AtomicVerdict(self.bootstrap, self.src, self.out, self.ck,
                          context=f"{self.context()}, {self.watcher.samples} LSO samples")
        v.check_exactly_once()
        v.check_batches_whole(seen)
        return v
