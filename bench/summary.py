"""One table of where Ketch stands against each performance goal (issue 24), from the JSON files
the other benchmarks wrote.

    python -m bench.summary [--dir bench] [--json bench/summary.json]

Every row is scenario, Ketch, reference, ratio, goal: the reference is what the same run measured
beside Ketch (librdkafka's mock, one Ketch broker for three, confluent-kafka for the bundled
client). A benchmark that was not run, or failed, shows as such instead of a figure: the table
never mixes figures of different runs into one ratio.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .targets import REPO_ROOT

FILES = {
    "throughput": "results.json",
    "transactions": "results-transactions.json",
    "client": "client-results.json",
    "pipeline": "results-pipeline.json",
    "stalls": "results-stalls.json",
}


@dataclass(frozen=True, slots=True)
class Row:
    scenario: str
    unit: str
    ketch: float | None
    reference: float | None
    reference_name: str
    goal: float  # a ratio, or an absolute figure when reference_name is empty
    note: str = ""
    at_most: bool = False  # the goal is a ceiling (stalls), not a floor

    @property
    def ratio(self) -> float | None:
        if not self.reference_name:
            return None
        if self.ketch is None or not self.reference:
            return None
        return self.ketch / self.reference

    @property
    def met(self) -> bool | None:
        """None when there is no goal (a figure only reported) or no figure."""
        value = self.ratio if self.reference_name else self.ketch
        if value is None or not (self.goal or self.at_most):
            return None
        return value <= self.goal if self.at_most else value >= self.goal


def _load(directory: Path, name: str) -> dict[str, Any] | None:
    path = directory / FILES[name]
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _num(d: Any, *keys: str) -> float | None:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return float(d) if isinstance(d, (int, float)) else None


def _throughput_rows(data: dict[str, Any] | None) -> Iterator[Row]:
    scenarios = (data or {}).get("scenarios", {})
    for name, label in (("produce", "produce acks=all"), ("idempotent", "idempotent produce"),
                        ("consume", "read_committed consume")):
        s = scenarios.get(name, {})
        yield Row(f"{label}, 1 broker", "msg/s", _num(s, "ketch", "msgs_per_s"), _num(s, "mock", "msgs_per_s"),
                  "mock", 1.0)
        if "ketch-3" in s:
            yield Row(f"{label}, 3 brokers RF 3", "msg/s", _num(s, "ketch-3", "msgs_per_s"),
                      _num(s, "ketch", "msgs_per_s"), "1 broker", 0.7)
        if "ketch-2dirs" in s:
            yield Row(f"{label}, 1 broker, 2 log dirs (one disk)", "msg/s", _num(s, "ketch-2dirs", "msgs_per_s"),
                      _num(s, "ketch", "msgs_per_s"), "1 log dir", 0, "reported, no goal")


def _transaction_rows(data: dict[str, Any] | None) -> Iterator[Row]:
    data = data or {}
    sizes = data.get("settings", {}).get("sizes", [1, 100, 10000])
    for k in sizes:
        key = f"txn-{k}"
        yield Row(f"transactions of {k}, 1 broker", "txn/s", _num(data, "ketch", key, "txns_per_s"),
                  _num(data, "mock", key, "txns_per_s"), "mock", 1.0)
        yield Row(f"transactions of {k}, 3 brokers RF 3", "txn/s", _num(data, "ketch-3", key, "txns_per_s"),
                  _num(data, "ketch", key, "txns_per_s"), "1 broker", 0.7)


def _client_rows(data: dict[str, Any] | None) -> Iterator[Row]:
    data = data or {}
    for what in ("produce", "consume"):
        yield Row(f"bundled client {what}", "msg/s", _num(data, "ketch-client", f"{what}_msgs_per_s"),
                  _num(data, "confluent-kafka", f"{what}_msgs_per_s"), "confluent-kafka", 1.0)


PIPELINE_TARGETS = {"ketch": "1 broker", "ketch-3": "3 brokers RF 3"}


def _pipeline_rows(data: dict[str, Any] | None) -> Iterator[Row]:
    """One row per target and transform; results written before targets existed are one broker's."""
    results = (data or {}).get("results", [])
    written = {r.get("target", "ketch") for r in results}
    targets = [t for t in PIPELINE_TARGETS if t in written] + sorted(written - set(PIPELINE_TARGETS))
    for target in targets or ["ketch", "ketch-3"]:
        for transform in ("passthrough", "enrich"):
            best = [r for r in results if r.get("transform") == transform and r.get("arrow")
                    and r.get("target", "ketch") == target]
            value = _num(best[0], "rows_per_s") if best else None
            notes = [] if transform == "passthrough" else ["reported beside passthrough"]
            if best and best[0].get("failed_runs"):
                notes.append(f"{best[0]['failed_runs']} run(s) failed: {(best[0].get('errors') or [''])[0]}")
            yield Row(f"Spark pipeline {transform} (Arrow, local[2]), {PIPELINE_TARGETS.get(target, target)}",
                      "rows/s", value, None, "", 200_000 if transform == "passthrough" else 0, "; ".join(notes))


def _stall_rows(data: dict[str, Any] | None) -> Iterator[Row]:
    run = (data or {}).get("ketch-3", {})
    brokers = run.get("brokers", {}) if isinstance(run, dict) else {}
    values = [_num(b, "stalls_100ms") for b in brokers.values()]
    counted = [v for v in values if v is not None]
    total = float(sum(counted)) if counted and len(counted) == len(values) else None
    minutes = run.get("minutes", "?") if isinstance(run, dict) else "?"
    yield Row(f"event-loop stalls >= 100 ms, 3 brokers, {minutes} min produce + transactions", "stalls",
              total, None, "", 0, at_most=True)
    lat = run.get("produce", {}).get("latency_ms", {}) if isinstance(run, dict) else {}
    yield Row("produce p99 under that load", "ms", _num(lat, "p99"), None, "", 0, "reported, no goal")


def rows(directory: Path) -> list[Row]:
    return [*_throughput_rows(_load(directory, "throughput")),
            *_transaction_rows(_load(directory, "transactions")),
            *_client_rows(_load(directory, "client")),
            *_pipeline_rows(_load(directory, "pipeline")),
            *_stall_rows(_load(directory, "stalls"))]


def _fmt(v: float | None) -> str:
    if v is None:
        return "not run"
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def render(table: list[Row]) -> str:
    head = ("scenario", "unit", "Ketch", "reference", "ratio", "goal", "met")
    lines = [head]
    for r in table:
        ratio = r.ratio
        goal = f">= {r.goal:g}x {r.reference_name}" if r.reference_name and r.goal else "-" if r.reference_name else (
            f"{'<=' if r.at_most else '>='} {r.goal:,.0f}" if r.goal or r.at_most else "-")
        met = {True: "yes", False: "NO", None: "-"}[r.met]
        lines.append((r.scenario, r.unit, _fmt(r.ketch),
                      f"{_fmt(r.reference)} ({r.reference_name})" if r.reference_name else "-",
                      "-" if ratio is None else f"{ratio:.2f}", goal, met))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.summary", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=REPO_ROOT / "bench", help="where the benchmarks wrote their JSON")
    ap.add_argument("--json", type=Path, default=None, help="also write the table here")
    args = ap.parse_args(argv)
    table = rows(args.dir)
    print(render(table))
    if args.json is not None:
        args.json.write_text(json.dumps([{**asdict(r), "ratio": r.ratio, "met": r.met} for r in table], indent=2)
                             + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
