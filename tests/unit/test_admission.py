"""The front door's rules (broker/admission.py): connection caps, the request memory pool, idleness."""

from __future__ import annotations

import pytest

from broker.admission import IDLE, TOO_MANY, TOO_MANY_FROM_IP, Admission, Limits, parse_ip_overrides


def test_the_n_plus_first_connection_from_one_address_is_refused_and_others_still_come_in() -> None:
    a = Admission(Limits(max_connections_per_ip=2))
    assert [a.connect("10.0.0.1", False) for _ in range(3)] == [None, None, TOO_MANY_FROM_IP]
    assert a.connect("10.0.0.2", False) is None
    a.disconnect("10.0.0.1", False)
    assert a.connect("10.0.0.1", False) is None  # a closed one frees its place
    assert a.open == 3 and a.per_ip == {"10.0.0.1": 2, "10.0.0.2": 1}


def test_an_override_raises_or_lowers_one_address_cap() -> None:
    a = Admission(Limits(max_connections_per_ip=1, per_ip_overrides={"10.0.0.9": 3, "10.0.0.8": 0}))
    assert [a.connect("10.0.0.9", False) for _ in range(4)] == [None, None, None, TOO_MANY_FROM_IP]
    assert a.connect("10.0.0.8", False) == TOO_MANY_FROM_IP
    assert [a.connect("10.0.0.1", False) for _ in range(2)] == [None, TOO_MANY_FROM_IP]


def test_the_broker_wide_cap_counts_every_address_but_brokers_are_never_refused() -> None:
    a = Admission(Limits(max_connections=2, max_connections_per_ip=1))
    assert a.connect("10.0.0.1", False) is None and a.connect("10.0.0.2", False) is None
    assert a.connect("10.0.0.3", False) == TOO_MANY
    # the inter-broker and controller listeners: not counted, not refused
    assert all(a.connect("10.0.0.1", True) is None for _ in range(10))
    a.disconnect("10.0.0.1", True)
    assert a.open == 2
    a.disconnect("10.0.0.2", False)
    assert a.connect("10.0.0.3", False) is None


def test_parse_ip_overrides() -> None:
    assert parse_ip_overrides("") == {}
    assert parse_ip_overrides("127.0.0.1:200, 10.1.1.1:5") == {"127.0.0.1": 200, "10.1.1.1": 5}
    assert parse_ip_overrides("[::1]:7,fe80::1:3") == {"::1": 7, "fe80::1": 3}
    for bad in ("127.0.0.1", "127.0.0.1:x", ":5"):
        with pytest.raises(ValueError):
            parse_ip_overrides(bad)


def test_a_connection_past_its_share_waits_but_one_request_alone_is_always_admitted() -> None:
    a = Admission(Limits(queued_max_request_bytes=1000, connection_max_request_bytes=100))
    assert a.may_hold(0, 60, False)
    a.take(60, False)
    assert a.may_hold(60, 40, False)
    assert not a.may_hold(60, 41, False)  # over the connection's share: wait for its answers
    assert a.may_hold(0, 900, False)  # bigger than a share, but the connection holds nothing
    a.give(60, False)
    assert a.held == 0


def test_the_pool_stops_every_client_connection_but_not_brokers_and_never_a_lone_request() -> None:
    a = Admission(Limits(queued_max_request_bytes=100, connection_max_request_bytes=100))
    a.take(80, False)
    assert not a.may_hold(0, 21, False)  # another connection: the pool is spent
    assert a.may_hold(0, 20, False)
    assert a.may_hold(0, 10_000, True)  # a broker's connection draws on no pool
    a.take(10_000, True)
    assert a.held == 80
    a.give(80, False)
    assert a.may_hold(0, 10_000, False)  # alone in an empty pool: admitted however large


def test_idle_means_silent_for_the_timeout_with_nothing_in_flight() -> None:
    a = Admission(Limits(idle_ms=1000))
    assert not a.idle(5000, 5999, busy=False)
    assert a.idle(5000, 6000, busy=False)
    assert not a.idle(5000, 60_000, busy=True)  # a long poll is us being slow, not the client idle
    assert IDLE == "idle"
    assert Admission(Limits(idle_ms=600_000)).sweep_interval_s() == 10.0
    assert Admission(Limits(idle_ms=100)).sweep_interval_s() == 0.05
