"""The rotation of light seeds that `make test` runs (docs/simulation.md, "In make test").

200 seeds of 6 virtual seconds of faults at intensity 0.25, split into four quarters, one per test
file (tests/sim/test_dst.py and test_dst_rotation_{2,3,4}.py): pytest-xdist hands out whole files
(--dist loadfile), so four files let the rotation run on every worker at once; a file holds
tests of four seeds each. SIM_FIRST_SEED and SIM_ROTATION move or widen it. Under
PYTHONHASHSEED=0, as `make test` runs, a seed here is the same run as on the command line.
"""

from __future__ import annotations

import os

from .run import simulate

ROTATION = int(os.environ.get("SIM_ROTATION", "200"))
FIRST = int(os.environ.get("SIM_FIRST_SEED", "1"))
QUARTERS = 4
CHUNK = 4  # seeds per test: a chunk stays well under a minute on a loaded machine
LIGHT = {"seconds": 6.0, "intensity": 0.25}


def replay(seed: int, seconds: float, intensity: float, breaks: str = "") -> str:
    """The command that replays a seed with its trace."""
    return (f"python -m tests.helpers.dst --seed {seed} --seconds {seconds:g} --intensity {intensity:g}"
            + (f" --break {breaks}" if breaks else "") + " --trace")


QUARTER = -(-ROTATION // QUARTERS)  # seeds per quarter (the last may have fewer)


def chunks(quarter: int) -> list[int]:
    """The first seed of each test of `quarter` (1-4)."""
    lo = FIRST + (quarter - 1) * QUARTER
    hi = min(FIRST + quarter * QUARTER, FIRST + ROTATION)
    return list(range(lo, hi, CHUNK)) if lo < hi else []


def run_chunk(first: int) -> None:
    """Run the seeds of one test; fail with each failing seed's summary and replay command."""
    quarter_end = FIRST + ((first - FIRST) // QUARTER + 1) * QUARTER
    failed = []
    for seed in range(first, min(first + CHUNK, quarter_end, FIRST + ROTATION)):
        r = simulate(seed, seconds=LIGHT["seconds"], intensity=LIGHT["intensity"])
        if not r.ok:
            failed.append(f"{r.summary()}\n  replay: {replay(seed, LIGHT['seconds'], LIGHT['intensity'])}")
        assert r.progress["acked"] > 0, f"seed {seed} acknowledged nothing: {r.summary()}"
    assert not failed, "\n".join(failed)
