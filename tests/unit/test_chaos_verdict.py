"""A chaos campaign's verdict (helpers.chaos.campaign.Result): every way a campaign can go wrong
fails it, not only anomalies in the history — a broker that died on its own or ignored SIGTERM is a
failure even when the history it left is clean."""

from __future__ import annotations

from pathlib import Path

from helpers.chaos.campaign import Result
from helpers.chaos.checker import Report
from helpers.chaos.nemesis import Cycle, Fault


def _result(**kw: object) -> Result:
    cycle = Cycle(1, Fault("kill", 1, 2, 0, 3.0, 5), 1, 0.0)
    cycle.recovery_s = 0.5
    args: dict[str, object] = {"seed": 7, "directory": Path("/nonexistent"), "report": Report(counts={"ops": 1}),
                               "cycles": [cycle], "workload_rc": 0, "seconds": 60.0}
    args.update(kw)
    return Result(**args)  # type: ignore[arg-type]


def test_a_clean_campaign_passes() -> None:
    r = _result()
    assert r.ok() and r.failures() == []


def test_a_broker_that_died_on_its_own_or_ignored_sigterm_fails_the_campaign() -> None:
    r = _result(cluster_errors="BrokerProcess(node 2) died during the test with exit code 1")
    assert not r.ok()
    assert any("died during the test" in f for f in r.failures()), r.failures()
    assert r.summary()["cluster_errors"].startswith("BrokerProcess(node 2) died")


def test_each_other_failure_is_named() -> None:
    unrecovered = Cycle(1, Fault("kill", 1, 2, 0, 3.0, 5), 1, 0.0)
    for r, says in ((_result(workload_rc=3), "workload exit 3"),
                    (_result(cycles=[unrecovered]), "never served again"),
                    (_result(cycles=[]), "no fault was injected")):
        assert not r.ok() and any(says in f for f in r.failures()), (says, r.failures())
