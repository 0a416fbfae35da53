"""Each of the chaos suite's break switches (storage/faults.py) is caught by the simulation: the
checker or an invariant fails the run. A switch nobody catches would mean a guarantee the
simulator cannot see broken. `fence` is caught by the zombie's bare Produce to a partition outside
its transaction (tests/helpers/dst/workload.py Zombie.raw_write): a library client asks the
coordinator first and is refused there, whatever the partition leader does.

A seed that caught it replays with `python -m tests.helpers.dst --seed N --break SWITCH ... --trace`.
"""

from __future__ import annotations

import pytest

from tests.helpers.dst.nemesis import KINDS
from tests.helpers.dst.run import simulate

ALL = KINDS
LEADER_CUT = ("isolate", "kill", "pause")

# Each switch: the seeds tried in turn until one catches it, the virtual seconds of faults, the
# workload's intensity and the fault kinds. acks, hw and truncate need a partition leader cut off,
# killed or paused while it holds what its followers have not fetched.
CATCHES: dict[str, tuple[range, float, float, tuple[str, ...]]] = {
    "lso": (range(1, 4), 6.0, 0.25, ALL),
    "fence": (range(1, 4), 6.0, 0.25, ALL),
    "markers": (range(1, 4), 6.0, 0.25, ALL),
    "dedup": (range(1, 11), 8.0, 0.25, ALL),
    "acks": (range(1, 7), 10.0, 0.5, LEADER_CUT),
    "hw": (range(1, 7), 10.0, 0.5, LEADER_CUT),
    "truncate": (range(1, 7), 10.0, 0.5, LEADER_CUT),
}


@pytest.mark.parametrize("switch", sorted(CATCHES))
def test_each_break_switch_is_caught(switch: str) -> None:
    seeds, seconds, intensity, faults = CATCHES[switch]
    for seed in seeds:
        r = simulate(seed, seconds, intensity=intensity, breaks=switch, faults=faults)
        if not r.ok:
            return
    pytest.fail(f"break switch {switch!r} went unnoticed in seeds {seeds.start}-{seeds.stop - 1} "
                f"({seconds:g} virtual s, intensity {intensity:g}, faults {','.join(faults)})")
