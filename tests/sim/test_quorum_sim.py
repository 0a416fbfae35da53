"""Issue 13: the quorum core under a seeded, deterministic simulation (tests/helpers/quorum_sim.py).

SEEDS runs of 5,000 steps each with drops, duplicates, reordering, network splits, crashes that
lose unpersisted state, restarts and snapshots; every step is checked for Raft's safety
properties, and every run must then make progress once the faults stop. Half the runs use three
voters, half five. docs/cluster.md gives the count and the time it takes.
"""

from __future__ import annotations

import os

import pytest
from helpers.quorum_sim import QuorumSim, Violation

from broker.quorum.messages import VoteRequest, VoteResponse
from broker.quorum.node import QuorumNode, Role

SEEDS = int(os.environ.get("KETCH_SIM_SEEDS", "2000"))
STEPS = 5000
CHUNKS = 8


def _run(seed: int, node_factory: type[QuorumNode] = QuorumNode) -> QuorumSim:
    sim = QuorumSim(seed, voters=3 if seed % 2 else 5, node_factory=node_factory)
    sim.run(STEPS)
    return sim


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_seeded_runs_keep_raft_safe_and_recover(chunk: int) -> None:
    elections = committed = deposed = 0
    for seed in range(chunk, SEEDS, CHUNKS):
        sim = _run(seed)
        elections += len(sim.leaders)
        deposed += sim.deposed_checked
        sim.settle()
        committed += len(sim.committed)
    # the runs must exercise something: leaders elected and entries committed in every chunk, and
    # deposed leaders still leading (whose leases the checker judged)
    assert elections >= SEEDS // CHUNKS and committed >= 10 * (SEEDS // CHUNKS) and deposed > 0


def test_replay() -> None:
    """KETCH_SIM_SEED=N replays one run (a failing seed prints this command)."""
    seed = int(os.environ.get("KETCH_SIM_SEED", "7"))
    _run(seed).settle()


class _DoubleVoter(QuorumNode):
    """Broken on purpose: grants every up-to-date candidate, ignoring the vote already cast."""

    def _on_vote_request(self, src: int, req: VoteRequest) -> None:
        if req.pre_vote or req.epoch < self.epoch:
            super()._on_vote_request(src, req)
            return
        if req.epoch > self.epoch:
            self._set_epoch(req.epoch, None)
        granted = self.role != Role.LEADER and self._log_up_to_date(req.last_epoch, req.last_offset)
        if granted:
            self.voted_for = src
            self._hs_dirty = True
        self._out.append((src, VoteResponse(self.epoch, granted, False, self.leader)))


def _first_violation(node_factory: type[QuorumNode], seeds: int) -> str:
    """What the checker reports first for a node broken on purpose ('' if nothing in `seeds`)."""
    for seed in range(seeds):
        try:
            _run(seed, node_factory)
        except Violation as v:
            return str(v)
    return ""


def test_the_checker_catches_two_votes_in_one_epoch() -> None:
    caught = _first_violation(_DoubleVoter, 200)
    assert "two leaders in epoch" in caught and "replay" in caught


class _HeardIsConfirmed(QuorumNode):
    """Broken on purpose: counts every voter whose fetch arrived lately as having confirmed the
    leader's whole log — the lease from fetch arrivals, before issue 23 item 5."""

    def lease_confirmations(self) -> dict[int, int]:
        lead = self._lead
        if self.role != Role.LEADER or lead is None:
            return {}
        recent = {v for v, t in lead.heard.items() if self.now - t < self.cfg.fetch_timeout_ticks}
        return {v: self.log_end - 1 for v in recent}


def test_the_checker_catches_a_lease_counted_from_fetch_arrivals() -> None:
    assert "holds a lease" in _first_violation(_HeardIsConfirmed, 400)
