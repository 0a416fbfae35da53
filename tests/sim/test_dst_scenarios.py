"""Issue 23's timing scenarios, each found by the simulator with its fix taken back, and each
seed kept as a regression (docs/simulation.md, "The cluster-correctness scenarios").

For each: with its break switch (storage/faults.py), the seed fails -- the simulator finds the
scenario; without it, the same seed passes -- the fix holds. Each run goes through the replay
command in a fresh process, which fixes PYTHONHASHSEED (a seed is one run only under one hash
seed), so a failure here replays as printed.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Scenario:
    switch: str
    seed: int
    faults: str
    seconds: float = 6.0
    intensity: float = 0.25
    size: int = 3

    def command(self, broken: bool) -> list[str]:
        return [sys.executable, "-m", "tests.helpers.dst", "--seed", str(self.seed), "--seconds", f"{self.seconds:g}",
                "--intensity", f"{self.intensity:g}", "--size", str(self.size), "--faults", self.faults,
                *(["--break", self.switch] if broken else [])]


SCENARIOS = {
    # item 1: two brokers restart together; their registrations, each decided on an image without
    # the other, commit a partition led from outside its ISR
    "registration racing a decision": Scenario("registration-serial", 6, "rack"),
    # item 2: a follower stalls until fenced, its leader (alone in the ISR) comes back from a power
    # loss within its session and keeps its leader epoch: the follower truncates acknowledged writes
    "sole-ISR restart": Scenario("sole-isr-epoch", 25, "strand"),
    # item 7: the transaction coordinator's leader crashes while its heir holds a confirmed
    # PrepareCommit above its high watermark and the third replica stalls: the heir loads without
    # it after 10 s and aborts a transaction its client was told committed
    "coordinator load during a stall": Scenario("load-to-end", 7, "takeover", size=5),
}


def _run(s: Scenario, broken: bool) -> tuple[int, str]:
    out = subprocess.run(s.command(broken), cwd=ROOT, capture_output=True, text=True, timeout=600)
    return out.returncode, (out.stdout + out.stderr)[-3000:]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_simulator_finds_the_scenario_with_its_fix_taken_back(name: str) -> None:
    s = SCENARIOS[name]
    code, out = _run(s, broken=True)
    assert code == 1, f"{name}: seed {s.seed} no longer finds it with --break {s.switch} " \
                      f"({' '.join(s.command(True)[2:])}):\n{out}"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_same_seed_passes_with_the_fix(name: str) -> None:
    s = SCENARIOS[name]
    code, out = _run(s, broken=False)
    assert code == 0, f"{name}: seed {s.seed} fails without any switch ({' '.join(s.command(False)[2:])} " \
                      f"--trace replays it):\n{out}"
