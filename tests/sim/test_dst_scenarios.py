"""Issue 23's timing scenarios, each found by the simulator with its fix taken back, and the fix
holding on the seed that found it (docs/simulation.md, "The cluster-correctness scenarios").

For each: seeds of a short list run with the scenario's break switch (storage/faults.py) until
one fails -- the simulator finds the scenario; that seed then runs without the switch and must
pass -- the fix holds. A list rather than one seed, because any change to the workload or the
nemesis makes every seed a different run (a seed that found a scenario once is not a regression
test by itself); the lists are a few times longer than the first finding needed when written.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.helpers.dst.nemesis import KINDS
from tests.helpers.dst.run import simulate


@dataclass(frozen=True)
class Scenario:
    switch: str
    faults: tuple[str, ...]
    seeds: range
    seconds: float = 6.0
    intensity: float = 0.25
    sizes: tuple[int, ...] = (3,)  # seed N runs sizes[N mod len], as `--size` and `make sim` give it

    def size(self, seed: int) -> int:
        return self.sizes[seed % len(self.sizes)]

    def replay(self, seed: int, broken: bool) -> str:
        faults = "" if self.faults == KINDS else f" --faults {','.join(self.faults)}"
        return (f"python -m tests.helpers.dst --seed {seed} --seconds {self.seconds:g} --intensity {self.intensity:g} "
                f"--size {','.join(map(str, self.sizes))}{faults}" + (f" --break {self.switch}" if broken else ""))


SCENARIOS = {
    # item 1: two brokers restart together; their registrations, each decided on an image without
    # the other, commit a partition led from outside its ISR
    "registration racing a decision": Scenario("registration-serial", ("rack",), range(1, 21)),
    # item 1 in the form: one broker stalls, another restarts and registers about when the
    # stalled one is fenced, with the quorum leader's disk slow: fence and registration decided on
    # one image (found at three brokers since a restarted voter follows the leader that refuses it)
    "registration racing a fence": Scenario("registration-serial", ("strand",), range(1, 21)),
    # item 2: a follower stalls until fenced, its leader (alone in the ISR) comes back from a power
    # loss within its session and keeps its leader epoch: the follower truncates acknowledged writes
    "sole-ISR restart": Scenario("sole-isr-epoch", ("strand",), range(1, 41)),
    # item 3: a follower catches up and its leader's AlterPartition adding it is held on a cut
    # link; the follower loses power and registers again before it arrives: the controller takes
    # a member named with its previous incarnation's broker epoch (`rejoin`, timed on the
    # registrations; 4 of seeds 1-20 found it when written)
    "delayed AlterPartition": Scenario("kip903", ("rejoin",), range(1, 21)),
    # item 7: the transaction coordinator's leader crashes while its heir holds a confirmed
    # PrepareCommit above its high watermark and the third replica stalls: the heir loads without
    # it after 10 s and aborts a transaction its client was told committed
    "coordinator load during a stall": Scenario("load-to-end", ("takeover",), range(1, 16), sizes=(5,)),
    # item 8: the copier group's partition moves away and back (`flip`) while its new leader's
    # load decodes a chunk; the superseded load goes on and finishes the new one before that
    # election's log is committed (the coordinator invariant). One seed: 1 of seeds 1-100 of 30 s
    # found it, and a list that long would cost minutes here
    "stale group loader": Scenario("group-load-epoch", ("flip",), range(79, 80), seconds=30.0, intensity=1.0),
    # item 9: two applications stall mid-transaction, their ids on two partitions of one
    # coordinator; its reaper's abort of the first is held while the second's partition moves
    # away and back, and that application commits meanwhile: the abort decided before the reload
    # is written after it (`reap-flip`; 2 of seeds 1-20 found it when written)
    "reaper's stale decision": Scenario("reaper-recheck", ("reap-flip",), range(1, 21)),
}


def _finds_and_holds(name: str, s: Scenario) -> None:
    for seed in s.seeds:
        size = s.size(seed)
        found = simulate(seed, s.seconds, size=size, breaks=s.switch, intensity=s.intensity, faults=s.faults)
        if found.ok:
            continue
        fixed = simulate(seed, s.seconds, size=size, intensity=s.intensity, faults=s.faults)
        assert fixed.ok, f"{name}: seed {seed} fails without the switch too ({s.replay(seed, False)} --trace):\n" \
                         f"{fixed.summary()}"
        return
    pytest.fail(f"{name}: no seed of {s.seeds.start}-{s.seeds.stop - 1} finds it with --break {s.switch} "
                f"({s.replay(s.seeds.start, True)})")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_simulator_finds_the_scenario_and_the_fix_holds_on_its_seed(name: str) -> None:
    _finds_and_holds(name, SCENARIOS[name])


# `make sim`'s own runs with each switch (every fault kind, 30 virtual s, the workload at full
# rate, sizes 3,3,3,5): the acceptance, each scenario found within the 1,000 seeds `make
# sim` runs by default (docs/simulation.md, "Found by `make sim`'s defaults"), the first seed that
# found it noted. A run of the defaults costs several light seeds and item 8's search about 650 of
# them, so these are in `make soak`, not `make test`.
def _defaults(switch: str) -> Scenario:
    return Scenario(switch, KINDS, range(1, 1001), seconds=30.0, intensity=1.0, sizes=(3, 3, 3, 5))


FOUND_BY_DEFAULTS = {
    "registration racing a decision": _defaults("registration-serial"),  # seed 6 first
    "sole-ISR restart": _defaults("sole-isr-epoch"),  # seed 13
    "delayed AlterPartition": _defaults("kip903"),  # seed 37
    "coordinator load during a stall": _defaults("load-to-end"),  # seed 7
    "stale group loader": _defaults("group-load-epoch"),  # seed 657
    "reaper's stale decision": _defaults("reaper-recheck"),  # seed 11
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FOUND_BY_DEFAULTS))
def test_make_sims_defaults_find_the_scenario(name: str) -> None:
    _finds_and_holds(name, FOUND_BY_DEFAULTS[name])
