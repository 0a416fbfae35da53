"""The test-only switches (storage/faults.py: KETCH_TEST_BREAK and KETCH_TEST_CRASH_AT) on a real broker process: an unknown name refuses to start, so a typo cannot
run a self-test that breaks nothing; a known one is announced as a warning naming what it breaks,
so a log read later shows the build was broken on purpose."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.broker import BrokerError, BrokerProcess

from storage.faults import GUARANTEES


@pytest.mark.parametrize(("env", "says"), [
    ({"KETCH_TEST_BREAK": "dedup,nonsense"}, "unknown guarantee(s) ['nonsense']"),
    ({"KETCH_TEST_CRASH_AT": "after_prepair"}, "unknown crash point 'after_prepair'"),
])
def test_an_unknown_switch_refuses_to_start(tmp_path: Path, env: dict[str, str], says: str) -> None:
    b = BrokerProcess(tmp_path / "data", env=env)
    try:
        with pytest.raises(BrokerError, match="exited with code"):
            b.start(timeout=30)
        assert says in b.log_tail()
    finally:
        b.close()


def test_a_broken_guarantee_is_announced_at_start(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", env={"KETCH_TEST_BREAK": "dedup,hw", "KETCH_TEST_CRASH_AT": "after_prepare"})
    try:
        b.start(timeout=30)
        log = b.log_text()
    finally:
        b.close()
    for name in ("dedup", "hw"):
        assert "a guarantee is broken on purpose" in log and name in log and GUARANTEES[name][:40] in log, log
    assert "the broker kills itself at a transaction step" in log and "after_prepare" in log, log
