"""Offset arithmetic of the source (pure functions; no Spark, no broker)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.offsets import OffsetSpecError, cap, from_json_dict, parse_spec, resolve, to_json_dict


def test_json_form_round_trips_and_is_sparks() -> None:
    offsets = {("a", 0): 5, ("a", 1): 0, ("b", 3): 9}
    assert to_json_dict(offsets) == {"a": {"0": 5, "1": 0}, "b": {"3": 9}}
    assert from_json_dict(to_json_dict(offsets)) == offsets


def test_parse_spec() -> None:
    assert parse_spec(" Earliest ") == "earliest"
    assert parse_spec("latest") == "latest"
    assert parse_spec('{"t": {"0": -2, "1": 7}}') == {("t", 0): -2, ("t", 1): 7}
    for bad in ("soon", "[1]", '{"t": {"0": -3}}', '{"t": 5}'):
        with pytest.raises(OffsetSpecError):
            parse_spec(bad)


def test_resolve_defaults_unnamed_partitions_to_earliest_and_clamps() -> None:
    tps = [("t", 0), ("t", 1), ("t", 2)]
    earliest = {("t", 0): 10, ("t", 1): 0, ("t", 2): 4}
    latest = {("t", 0): 20, ("t", 1): 30, ("t", 2): 8}
    spec = parse_spec('{"t": {"0": 3, "1": -1}}')
    assert resolve(spec, tps, earliest, latest) == {("t", 0): 10, ("t", 1): 30, ("t", 2): 4}
    assert resolve("latest", tps, earliest, latest) == latest
    assert resolve(parse_spec('{"t": {"0": 99}}'), tps[:1], earliest, latest) == {("t", 0): 20}


def test_cap_splits_by_backlog() -> None:
    start = {("t", 0): 0, ("t", 1): 100}
    end = {("t", 0): 300, ("t", 1): 200, ("t", 2): 0}
    assert cap(start, end, 1000) == end
    capped = cap(start, end, 40)
    assert capped == {("t", 0): 30, ("t", 1): 110, ("t", 2): 0}


@given(st.dictionaries(st.integers(0, 6), st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1),
       st.integers(1, 3000))
def test_cap_never_exceeds_limit_and_always_progresses(parts: dict[int, tuple[int, int]], limit: int) -> None:
    start = {("t", p): a for p, (a, _) in parts.items()}
    end = {("t", p): a + b for p, (a, b) in parts.items()}
    capped = cap(start, end, limit)
    moved = sum(capped[tp] - start[tp] for tp in end)
    backlog = sum(end[tp] - start[tp] for tp in end)
    assert moved == min(limit, backlog)
    assert all(start[tp] <= capped[tp] <= end[tp] for tp in end)
