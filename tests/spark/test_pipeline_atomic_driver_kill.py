"""The batch-atomic sink's driver SIGKILLed between its commits of a micro-batch (one task's
transaction committed, the others prepared) and restarted from the checkpoint, a read_committed
reader watching all along: it never sees part of a micro-batch, and the output is exactly once
(atomic_kills.py; more kills, at random points, in the soak)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from atomic_kills import AtomicKills
from atomic_support import ALLOW_2PC
from pipeline_support import create_topics

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def test_a_driver_killed_between_its_commits_is_finished_by_the_restart_and_no_reader_sees_part_of_it(
        broker_factory, topic: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(env=ALLOW_2PC)
    run = AtomicKills(b.bootstrap, topic, tmp_path, 120, max_offsets_per_trigger=40)
    asyncio.run(create_topics(run.bootstrap, [run.src, run.out]))
    run.generate()
    run.run_and_kill("completed")
    run.finish()
    run.verdict()
