"""Soak: the orders job on three brokers (RF 3, min.insync.replicas 2), its driver SIGKILLed
KETCH_PIPELINE_SOAK_KILLS times (default 10) at random points and restarted from its checkpoint,
and one broker SIGKILLed while a driver runs (restarted before the next driver starts): still
exactly once (driver_kills.py). Marked ``slow``: run by ``make soak``, not ``make test``.

Prints how long each restart took, from the driver's start to the first micro-batch it committed
(JVM start, the queries' recovery from their checkpoints, the replayed batch), the figure
docs/pipeline.md quotes. KETCH_PIPELINE_SOAK_SEED fixes the random choices (the timing of the
kills still varies); the seed is in every failure message.
"""

from __future__ import annotations

import os
import random
import statistics
from pathlib import Path

import pytest
from driver_kills import DriverKills
from helpers import unique_topic
from helpers.cluster import Cluster
from helpers.cluster_metadata import SHORT_SESSION, listed_everywhere, new_topic, voters_for
from helpers.soak import env_int

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(3600)]

KILLS = env_int("KETCH_PIPELINE_SOAK_KILLS", 10)
ORDERS = env_int("KETCH_PIPELINE_SOAK_ORDERS", 8000)
PER_TRIGGER = 250  # offsets per micro-batch: enough batches for every kill to land mid-stream
SEED = env_int("KETCH_PIPELINE_SOAK_SEED", random.randrange(1 << 30))


def test_orders_job_is_exactly_once_across_driver_kills_and_a_broker_kill_on_three_brokers(
        cluster_factory, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env=SHORT_SESSION)
    listed_everywhere(c)
    run = DriverKills(c.bootstrap, unique_topic("soak-orders"), tmp_path, ORDERS, PER_TRIGGER, seed=SEED)
    for t in (run.src, run.enriched, run.totals):
        new_topic(c, t, 2, 3, {"min.insync.replicas": "2"})
    run.generate()
    broker_kill = run.rng.randrange(1, KILLS - 1)  # during which driver run a broker dies
    victim: int | None = None
    for i in range(KILLS):
        if victim is not None:
            c[victim].start(timeout=60)
            run.points.append(f"broker {victim} back")
            victim = None
        proc = run.start_driver()
        if i == broker_kill:
            run.kill_at_random_point(proc, kill_driver=False)
            victim = run.rng.choice(c.node_ids)
            c.kill(victim)
            run.points.append(f"broker {victim} killed")
        run.kill_at_random_point(proc)
    if victim is not None:
        c[victim].start(timeout=60)
    run.finish()
    run.check_exactly_once()
    restarts = sorted(run.restarts_s)
    assert restarts and run.started_s, f"{run.context()}: no restart got as far as a committed micro-batch"
    started = sorted(run.started_s)
    with capsys.disabled():  # shown by `make soak` even though the test passed
        print(f"\n[pipeline soak] {run.context()}: restarts from the checkpoint, from the driver's start: "
              f"queries running after median {statistics.median(started):.1f} s (max {started[-1]:.1f} s, "
              f"n={len(started)}; JVM, session, checkpoint recovery), first micro-batch committed after "
              f"median {statistics.median(restarts):.1f} s (min {restarts[0]:.1f} s, max {restarts[-1]:.1f} s, "
              f"n={len(restarts)}); load average {os.getloadavg()[0]:.1f}")
