"""Produce latency while a large partition is compacted: this checkout against a reference one.

    python -m bench.compaction --out bench/results-compaction.json [--mb 500] [--reference REV]

A broker is started, one topic is filled with `--mb` MB of keyed 1 KiB records (cleanup.policy
delete, so nothing compacts yet), then a probe producer sends one small message every 2 ms to
another topic (acks=all, linger.ms=0) and records each message's latency: first for a quiet
window, then after the filled topic is switched to cleanup.policy=compact, until the broker logs
"log cleaned" for it. The same run is done with the broker of `--reference` (a git revision,
checked out in a temporary worktree; default: the last revision that compacted on the event
loop), so the two figures come from one machine at one time. See docs/bench.md.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from array import array
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from .throughput import (
    QUIET,
    REPO_ROOT,
    KetchBroker,
    _percentiles,
    git_commit,
    log,
    machine_info,
    reference_checkout,
)

# The last commit whose broker ran compaction passes on its event loop.
ON_LOOP_REFERENCE = "5783ea1"
VALUE_BYTES = 1024
KEYS = 5_000
PROBE_INTERVAL_S = 0.002
QUIET_WINDOW_S = 3.0
ENV = {"KETCH_LOG_RETENTION_CHECK_INTERVAL_MS": "1000"}


def _fill(bootstrap: str, topic: str, mb: int) -> int:
    n = mb * 1_000_000 // VALUE_BYTES
    errors: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.num.messages": 500,
                  "on_delivery": report, **QUIET})
    pad = b"v" * (VALUE_BYTES - 10)
    for i in range(n):
        while True:
            try:
                p.produce(topic, key=b"key-%06d" % (i % KEYS), value=b"%010d" % i + pad)
                break
            except BufferError:
                p.poll(0.01)
        if i % 5000 == 0:
            p.poll(0)
    if p.flush(300):
        raise RuntimeError("fill did not complete")
    if errors:
        raise RuntimeError(f"{len(errors)} records not written, first: {errors[0]}")
    return n


def _probe(bootstrap: str, topic: str, until: Any, deadline_s: float) -> array:
    """Send a message every PROBE_INTERVAL_S until `until()` is true; latency (ms) of each."""
    latencies = array("d")
    now = time.perf_counter

    def done(err: Any, msg: Any) -> None:
        if err is None:
            latencies.append((now() - float(msg.value())) * 1000)

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "on_delivery": done, **QUIET})
    p.produce(topic, value=b"%f" % now())
    p.flush(30)
    latencies = array("d")
    end = time.monotonic() + deadline_s
    while not until():
        if time.monotonic() > end:
            raise TimeoutError("probe deadline passed before the condition")
        p.produce(topic, value=b"%f" % now())
        p.poll(PROBE_INTERVAL_S)  # paces the probe and serves delivery reports
    p.flush(30)
    return latencies


def run_target(repo: Path, mb: int, timeout: float) -> dict[str, Any]:
    broker = KetchBroker(1, env=ENV, repo=repo)
    try:
        big, probe = f"compact-me-{uuid.uuid4().hex[:6]}", f"probe-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
        futs = admin.create_topics([
            NewTopic(big, 1, 1, config={"cleanup.policy": "delete", "segment.bytes": str(8 * 1024 * 1024)}),
            NewTopic(probe, 1, 1),
        ])
        for f in futs.values():
            f.result(60)
        t0 = time.monotonic()
        records = _fill(broker.bootstrap, big, mb)
        fill_s = time.monotonic() - t0
        started = time.monotonic()
        quiet = _probe(broker.bootstrap, probe, lambda: time.monotonic() - started > QUIET_WINDOW_S, 60)

        def cleaned() -> bool:
            return any('"log cleaned"' in line and big in line for line in broker.log_path.read_text().splitlines())

        res = ConfigResource(ConfigResource.Type.TOPIC, big, set_config={"cleanup.policy": "compact"})
        for f in admin.alter_configs([res]).values():  # AlterConfigs: both revisions serve it
            f.result(60)
        t1 = time.monotonic()
        during = _probe(broker.bootstrap, probe, cleaned, timeout)
        return {
            "records": records, "mb": mb, "fill_s": round(fill_s, 2),
            "until_cleaned_s": round(time.monotonic() - t1, 2),
            "quiet_latency_ms": _percentiles(quiet), "quiet_samples": len(quiet),
            "compaction_latency_ms": _percentiles(during), "compaction_samples": len(during),
        }
    finally:
        broker.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=500, help="size of the compacted partition (default 500 MB)")
    ap.add_argument("--reference", default=ON_LOOP_REFERENCE, help="git revision to compare with")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--out", default=str(REPO_ROOT / "bench" / "results-compaction.json"))
    args = ap.parse_args(argv)
    out: dict[str, Any] = {"generated_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine_info(),
                           "settings": {"mb": args.mb, "value_bytes": VALUE_BYTES, "keys": KEYS,
                                        "probe_interval_ms": PROBE_INTERVAL_S * 1000, "reference": args.reference,
                                        "ketch_commit": git_commit()}}
    failed = False
    with reference_checkout(args.reference) as ref_dir:
        for name, repo in (("ketch", REPO_ROOT), ("reference", ref_dir)):
            log(f"{name}: filling {args.mb} MB and compacting it")
            try:
                out[name] = run_target(repo, args.mb, args.timeout)
            except Exception as e:  # recorded, and the other target still runs
                failed = True
                out[name] = {"error": repr(e)}
            log(f"{name}: {out[name]}")
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    log(f"wrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
