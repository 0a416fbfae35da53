"""bench.summary: the one table `make bench` ends with reads each benchmark's JSON as written and
never fills a missing figure in."""

from __future__ import annotations

import json
from pathlib import Path

from bench.summary import render, rows


def _write(d: Path, name: str, data: object) -> None:
    (d / name).write_text(json.dumps(data))


def test_ratios_come_from_figures_of_the_same_file_and_missing_ones_say_not_run(tmp_path: Path) -> None:
    _write(tmp_path, "results-transactions.json", {
        "settings": {"sizes": [1]},
        "mock": {"txn-1": {"txns_per_s": 600.0}},
        "ketch": {"txn-1": {"txns_per_s": 300.0}},
        "ketch-3": {"txn-1": {"txns_per_s": 240.0}},
    })
    _write(tmp_path, "results-pipeline.json", {"results": [
        {"target": "ketch", "transform": "passthrough", "arrow": True, "rows_per_s": 250_000},
        {"target": "ketch", "transform": "passthrough", "arrow": False, "rows_per_s": 90_000},
        {"target": "ketch-3", "transform": "passthrough", "arrow": True, "rows_per_s": 150_000},
        {"target": "ketch-3", "transform": "enrich", "arrow": True, "rows_per_s": 80_000},
        {"target": "ketch", "transform": "enrich", "arrow": True, "rows_per_s": None, "failed_runs": 3,
         "errors": ["TransactionAbortableError: OUT_OF_ORDER_SEQUENCE_NUMBER"]}]})
    _write(tmp_path, "results-stalls.json", {"ketch-3": {"minutes": 10, "brokers": {
        "1": {"stalls_100ms": 0}, "2": {"stalls_100ms": 2}, "3": {"stalls_100ms": 0}},
        "produce": {"latency_ms": {"p99": 40.5}}}})
    table = {r.scenario: r for r in rows(tmp_path)}
    stalls = table["event-loop stalls >= 100 ms, 3 brokers, 10 min produce + transactions"]
    assert (stalls.ketch, stalls.met) == (2.0, False)  # a ceiling of 0: two stalls miss it

    one = table["transactions of 1, 1 broker"]
    assert (one.ketch, one.reference, one.ratio, one.met) == (300.0, 600.0, 0.5, False)
    three = table["transactions of 1, 3 brokers RF 3"]
    assert (three.reference, three.ratio, three.met) == (300.0, 0.8, True)
    pipe = table["Spark pipeline passthrough (Arrow, local[2]), 1 broker"]
    assert (pipe.ketch, pipe.ratio, pipe.met) == (250_000, None, True)
    pipe3 = table["Spark pipeline passthrough (Arrow, local[2]), 3 brokers RF 3"]
    assert (pipe3.ketch, pipe3.met) == (150_000, False)
    assert table["Spark pipeline enrich (Arrow, local[2]), 3 brokers RF 3"].ketch == 80_000
    failed = table["Spark pipeline enrich (Arrow, local[2]), 1 broker"]  # every run failed: no figure, why
    assert failed.ketch is None and "3 run(s) failed: TransactionAbortableError" in failed.note
    produce = table["produce acks=all, 1 broker"]  # results.json was not written
    assert (produce.ketch, produce.reference, produce.met) == (None, None, None)

    text = render(list(table.values()))
    assert "not run" in text
    assert "0.50" in text and "0.80" in text


def test_two_log_dirs_are_reported_against_one_in_the_same_run_without_a_goal(tmp_path: Path) -> None:
    _write(tmp_path, "results.json", {"scenarios": {"produce": {
        "ketch": {"msgs_per_s": 200_000.0}, "ketch-2dirs": {"msgs_per_s": 190_000.0}}}})
    table = {r.scenario: r for r in rows(tmp_path)}
    two = table["produce acks=all, 1 broker, 2 log dirs (one disk)"]
    assert (two.ketch, two.reference, two.ratio, two.met) == (190_000.0, 200_000.0, 0.95, None)
    line = next(x for x in render([two]).splitlines() if x.startswith("produce"))
    assert "0.95" in line and "1 log dir" in line and line.split()[-1] == "-"  # no goal, nothing met or missed
    assert "produce acks=all, 1 broker, 2 log dirs (one disk)" not in {
        r.scenario for r in rows(tmp_path / "nothing")}  # not run: no row at all


def test_pipeline_results_written_before_targets_are_one_brokers(tmp_path: Path) -> None:
    _write(tmp_path, "results-pipeline.json", {"results": [
        {"transform": "passthrough", "arrow": True, "rows_per_s": 120_000}]})
    table = {r.scenario: r for r in rows(tmp_path)}
    assert table["Spark pipeline passthrough (Arrow, local[2]), 1 broker"].ketch == 120_000
    assert not any("3 brokers" in name and "pipeline" in name for name in table)
