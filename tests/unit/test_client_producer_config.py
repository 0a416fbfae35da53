"""Producer settings that would break exactly-once are refused at construction, as the Java
client refuses them (seed 002: the broker deduplicates against five batches per producer)."""

from __future__ import annotations

import pytest

from client import Producer

BOOTSTRAP = "127.0.0.1:1"  # never contacted: construction does no I/O


async def test_more_than_five_in_flight_with_idempotence_is_refused() -> None:
    with pytest.raises(ValueError, match="max_in_flight must be at most 5"):
        Producer(BOOTSTRAP, enable_idempotence=True, max_in_flight=6)
    with pytest.raises(ValueError, match="max_in_flight must be at most 5"):
        Producer(BOOTSTRAP, transactional_id="t", max_in_flight=6)


async def test_idempotence_by_default_steps_aside_for_more_in_flight() -> None:
    p = Producer(BOOTSTRAP, max_in_flight=6)
    assert p.idempotent is False and p.max_in_flight == 6
    q = Producer(BOOTSTRAP, max_in_flight=5)
    assert q.idempotent is True and q.max_in_flight == 5


async def test_zero_in_flight_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Producer(BOOTSTRAP, max_in_flight=0)
