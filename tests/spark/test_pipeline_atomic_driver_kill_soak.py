"""Soak: the batch-atomic sink on three brokers (RF 3, min.insync.replicas 2, 2PC allowed), its driver
SIGKILLed KETCH_PIPELINE_ATOMIC_SOAK_KILLS times (default 8) at random points (atomic_kills.py:
while the tasks write, after their prepares, after the decision, between the driver's commits,
after the batch became readable, after Spark logged it) and restarted from its checkpoint, and
one broker SIGKILLed while a driver runs (restarted before the next driver), a read_committed
reader watching throughout: it never sees part of a micro-batch, and the output is exactly once.
Marked ``slow``: run by ``make soak``. KETCH_PIPELINE_ATOMIC_SOAK_SEED fixes the random choices;
the seed is in every failure message.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from atomic_kills import AtomicKills
from atomic_support import ALLOW_2PC
from helpers import unique_topic
from helpers.cluster import Cluster
from helpers.cluster_metadata import SHORT_SESSION, listed_everywhere, new_topic, voters_for
from helpers.soak import env_int

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(3600)]

KILLS = env_int("KETCH_PIPELINE_ATOMIC_SOAK_KILLS", 8)
RECORDS = env_int("KETCH_PIPELINE_ATOMIC_SOAK_RECORDS", 1500)
PER_TRIGGER = 60  # offsets per micro-batch: enough batches for every kill to land mid-stream
SEED = env_int("KETCH_PIPELINE_ATOMIC_SOAK_SEED", random.randrange(1 << 30))


def test_no_reader_sees_part_of_a_micro_batch_across_driver_kills_and_a_broker_kill_on_three_brokers(
        cluster_factory, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env={**ALLOW_2PC, **SHORT_SESSION})
    listed_everywhere(c)
    run = AtomicKills(c.bootstrap, unique_topic("atomic-soak"), tmp_path, RECORDS, PER_TRIGGER, seed=SEED)
    for t in (run.src, run.out):
        new_topic(c, t, 2, 3, {"min.insync.replicas": "2"})
    run.generate()
    broker_kill = run.rng.randrange(1, KILLS - 1)  # during which driver run a broker dies
    victim: int | None = None
    for i in range(KILLS):
        if victim is not None:
            c[victim].start(timeout=60)
            run.points.append(f"broker {victim} back")
            victim = None
        if i == broker_kill:  # the driver must go on to its next kill point without the broker
            proc = run.start_driver()
            run.at_watched_point(proc, kill_driver=False)
            victim = run.rng.choice(c.node_ids)
            c.kill(victim)
            run.points.append(f"broker {victim} killed")
            run.at_watched_point(proc)
        else:
            run.run_and_kill()
    if victim is not None:
        c[victim].start(timeout=60)
    run.finish()
    verdict = run.verdict()
    with capsys.disabled():
        print(f"\n[atomic soak] {run.context()}: {len(verdict.batches)} micro-batches, {len(verdict.output)} records "
              f"exactly once, none seen in part by {run.watcher.samples} LSO samples; "
              f"load average {os.getloadavg()[0]:.1f}")
