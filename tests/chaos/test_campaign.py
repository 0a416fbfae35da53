"""Chaos campaigns against a 3-broker cluster in network namespaces (docs/chaos.md).

* The short campaign (in ``make test``): a minute or so of seeded faults, every kind at least once,
  while the mixed workload and the transactional copier run; the recorded history must hold no
  anomaly, the workload must finish, no broker may die on its own or ignore SIGTERM, the cluster
  must serve again after every fault, and the clients must have made progress in proportion to the
  time (acknowledged sends and committed transactions per minute of faults). Its seed comes from a
  fixed rotation (one a day), so a failure replays; ``KETCH_CHAOS_SEED`` replays another seed,
  ``KETCH_CHAOS_SECONDS`` sets the minimum fault time.
* Broken builds (``make chaos``, marked ``chaos_selftest``): each starts the brokers with one
  guarantee broken on purpose (KETCH_TEST_BREAK, storage/faults.py) and expects the checker to report
  the anomaly that guarantee exists to prevent. They prove the short campaign's "0 anomalies" means
  something. Seeds that once found an anomaly are replayed there too.

Needs root (namespaces, iptables); without it the test fails rather than skips.
"""

from __future__ import annotations

import datetime
import os
import random
from pathlib import Path

import pytest
from helpers.chaos import net
from helpers.chaos.campaign import Result, run_campaign
from helpers.chaos.nemesis import KINDS


def _require_namespaces() -> None:
    why = net.available()
    if why is not None:
        pytest.fail(f"the chaos suite cannot run here: {why}")


def _explain(r: Result) -> str:
    return (f"seed {r.seed} (replay: KETCH_CHAOS_SEED={r.seed}); report {r.directory / 'report.md'}\n"
            f"{r.summary()}\n{r.report.render()[:6000]}")


# The short campaign's seeds, one a day in turn: each gives its own order of faults, holds and targets.
ROTATION = (20261125, 15626983, 4242, 7)
# Progress per minute of faults the clients must at least make (two plain producers send 40/s each,
# 4,800 a minute; the hour-long campaigns acknowledged ~4,700 sends and committed ~1,050
# transactions a minute): a cluster that stays "correct" by serving next to nothing fails. A
# fresh-clone run beside a million-frame fuzz campaign and three helpers (load ~10 on 2 cores)
# committed 199.x a minute: the floor is half that.
MIN_PER_MINUTE = {"send-ok": 1500, "txn-commit": 100}


@pytest.mark.timeout(1200)
def test_short_campaign_has_no_anomalies(tmp_path: Path) -> None:
    _require_namespaces()
    seed = int(os.environ.get("KETCH_CHAOS_SEED") or ROTATION[datetime.date.today().toordinal() % len(ROTATION)])
    seconds = float(os.environ.get("KETCH_CHAOS_SECONDS") or 45)
    r = run_campaign(tmp_path / "campaign", seconds=seconds, seed=seed, kinds=tuple(KINDS), hold=(1.0, 3.0),
                     every_kind=True)
    assert not r.failures(), f"{r.failures()}: {_explain(r)}"
    assert {c.fault.kind for c in r.cycles} == set(KINDS), _explain(r)
    slow = {k: round(r.per_minute(k)) for k, least in MIN_PER_MINUTE.items() if r.per_minute(k) < least}
    assert not slow, f"too little progress per minute of faults: {slow} < {MIN_PER_MINUTE}: {_explain(r)}"


BREAKS = {
    # guarantee broken: (faults that expose it, anomaly kinds of which at least one must be reported)
    "lso": (("slow",), {"aborted-read", "precommitted-read"}),
    "markers": (("slow",), {"hanging-txn"}),
    "acks": (("isolate-leader",), {"lost-write"}),
    # the clients are cut off from a broker while its answers to their produce requests are on the way
    # (or a leader dies with a batch its followers have): the producer re-sends the batch under the same
    # epoch and sequence once its request times out (2 s here, so within the hold)
    "dedup": (("client-cut", "kill-leader"), {"duplicate"}),
    # an isolated leader's unreplicated tail survives its return as a follower, and shows when it leads again
    "truncate": (("isolate-leader", "kill-leader"), {"inconsistent-offsets", "lost-write", "duplicate"}),
    "hw": (("isolate-leader",), {"lost-write"}),
    # the zombie (helpers.chaos.zombie) writes under its fenced epoch in every cycle, faults or not;
    # the faults only make it find the leaders and the coordinator again
    "fence": (("client-cut", "kill-leader"), {"fenced-write"}),
}


@pytest.mark.chaos_selftest
@pytest.mark.timeout(900)
@pytest.mark.parametrize("guarantee", sorted(BREAKS))
def test_checker_catches_a_broken_guarantee(tmp_path: Path, guarantee: str) -> None:
    _require_namespaces()
    kinds, expected = BREAKS[guarantee]
    seed = int(os.environ.get("KETCH_CHAOS_SEED") or random.randrange(1 << 24))
    r = run_campaign(tmp_path / "campaign", seconds=30, seed=seed, kinds=kinds, hold=(8.0, 10.0),
                     broken=guarantee, every_kind=True, request_timeout_ms=2000 if guarantee == "dedup" else 0)
    found = set(r.report.anomalies)
    assert found & expected, f"KETCH_TEST_BREAK={guarantee}: expected one of {expected}, got {found}: {_explain(r)}"


# Seeds whose campaigns found an anomaly, replayed after the fix (docs/chaos.md "Found so far").
REGRESSION_SEEDS = {
    # torn-write on a partition leader restarted within the session timeout: it led again at the old
    # epoch with the shorter log and its followers truncated an acknowledged write (inconsistent-offsets)
    15626983: 60.0,
    # a copier's transactional id wedged in CONCURRENT_TRANSACTIONS: its coordinator's transition was
    # cut off when the server cancelled the handler of a closed connection (the copier never finished)
    4242: 60.0,
}


@pytest.mark.chaos_selftest
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("seed", sorted(REGRESSION_SEEDS))
def test_a_seed_that_found_an_anomaly_finds_none(tmp_path: Path, seed: int) -> None:
    _require_namespaces()
    r = run_campaign(tmp_path / "campaign", seconds=REGRESSION_SEEDS[seed], seed=seed, kinds=tuple(KINDS))
    assert not r.failures(), f"{r.failures()}: {_explain(r)}"
