"""Seeds of the whole-cluster simulation (tests/helpers/dst) that once found a bug, run again.

Each runs the real brokers and the bundled-client workload in virtual time and must come out
clean. A seed replays its original run exactly only under the PYTHONHASHSEED it was found with
(0, what `python -m tests.helpers.dst` sets); under another the run takes a different course, so
the unit test named with each seed is the precise regression and the seed a broader one.
"""

from __future__ import annotations

from tests.helpers.dst.run import simulate


def test_seed_18_a_transaction_outlives_a_wall_clock_step_on_its_coordinator() -> None:
    """Its coordinator's wall clock stepped an hour back: the reaper left two transactions open
    past their timeout, and their partitions' last stable offsets stayed put
    (tests/unit/test_txn_timeout_clock.py)."""
    result = simulate(18, 30, disk="os")
    assert result.ok, result.summary()
