"""The follower's replication quota (broker/throttle.py), on a hand-driven clock."""

from __future__ import annotations

import pytest

from broker.throttle import ByteRateQuota, listed


def test_the_bucket_holds_one_second_and_goes_into_debt() -> None:
    q = ByteRateQuota(1000, now_s=0.0)
    assert q.available(0.0) and q.wait_s(0.0) == 0.0
    q.record(1500, 0.0)  # one fetch may bring more than is left: it is not cut short
    assert not q.available(0.0)
    assert q.wait_s(0.0) == pytest.approx(0.501)  # 500 bytes of debt at 1000 B/s, then 1 byte
    assert not q.available(0.4)
    assert q.available(0.6)
    # Idle time refills at most one second's worth: no burst of ten seconds after ten idle ones.
    q.record(0, 10.6)
    q.record(1000, 10.6)
    assert not q.available(10.6)


def test_the_average_rate_is_the_quota() -> None:
    """Fetch 100 KB whenever allowed, for 10 seconds at 10 KB/s: about 100 KB + one burst get through."""
    q = ByteRateQuota(10_000, now_s=0.0)
    got, now = 0, 0.0
    while now < 10.0:
        if q.available(now):
            q.record(4_000, now)
            got += 4_000
        now = round(now + 0.01, 2)
    assert 100_000 <= got <= 100_000 + 10_000 + 4_000


def test_rate_must_be_positive() -> None:
    with pytest.raises(ValueError):
        ByteRateQuota(0, 0.0)


def test_which_replicas_a_topic_lists() -> None:
    assert listed("*", 3, 7)
    assert listed("0:1, 3:7", 3, 7)
    assert not listed("0:1,3:8", 3, 7)
    assert not listed("", 0, 1)
