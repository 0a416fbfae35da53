"""The orders job, its Spark driver SIGKILLed at random points and restarted from its checkpoint
(driver_kills.py): every order exactly once in the enriched stream, exactly one totals snapshot
per committed batch, final totals equal to those computed from the input."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from driver_kills import DriverKills
from pipeline_support import create_topics

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

ORDERS = 800
KILLS = 3


def test_orders_job_is_exactly_once_across_driver_kills(broker, topic: str, tmp_path: Path) -> None:
    run = DriverKills(broker.bootstrap, topic, tmp_path, ORDERS, max_offsets_per_trigger=120)
    asyncio.run(create_topics(run.bootstrap, [run.src, run.enriched, run.totals]))
    run.generate()
    for _ in range(KILLS):
        run.kill_at_random_point(run.start_driver())
    run.finish()
    run.check_exactly_once()
