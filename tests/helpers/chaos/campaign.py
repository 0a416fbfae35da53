"""A chaos campaign: a 3-broker cluster in namespaces, the workload in the client namespace, the
nemesis for a while, then a drain, the history check and a report.

``run_campaign`` is what tests call (a short campaign in ``make test``, broken builds); ``main`` is
``make chaos`` (``python -m tests.chaos.campaign --seconds 3600 --seed 7``). The report (report.json
and report.md in the campaign directory) gives the fault cycles, the operations, the anomalies by
kind and each fault's recovery time: from healing until a fresh acks=all produce and a read_committed
read of it both succeed, measured from the admin link.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from ..broker import REPO_ROOT
from ..confluent import wait_visible
from . import checker
from .batches import batches_op
from .cluster import NetCluster
from .nemesis import KINDS, Cycle, Nemesis, Schedule
from .net import CLIENT, Net
from .zombie import PARTITIONS as ZOMBIE_PARTITIONS

PARTITIONS = 4
BROKER_ENV = {
    "KETCH_DEFAULT_REPLICATION_FACTOR": "3",
    "KETCH_MIN_INSYNC_REPLICAS": "2",
    "KETCH_OFFSETS_TOPIC_NUM_PARTITIONS": "8",
    "KETCH_TRANSACTION_STATE_NUM_PARTITIONS": "8",
    "KETCH_TRANSACTION_ABORT_TIMED_OUT_INTERVAL_MS": "1000",
    "KETCH_REPLICA_LAG_TIME_MAX_MS": "10000",
}
RECOVERY_TIMEOUT = 120.0


@dataclass
class Result:
    seed: int
    directory: Path
    report: checker.Report
    cycles: list[Cycle]
    workload_rc: int
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)
    # what stopping the cluster found: a broker that died on its own or ignored SIGTERM
    cluster_errors: str | None = None
    fault_seconds: float = 0.0  # from the first fault to the last heal

    @property
    def unrecovered(self) -> list[Cycle]:
        return [c for c in self.cycles if c.recovery_s is None]

    def summary(self) -> dict[str, Any]:
        by_kind: dict[str, list[float]] = defaultdict(list)
        for c in self.cycles:
            if c.recovery_s is not None:
                by_kind[c.fault.kind].append(c.recovery_s)
        rep = self.report.to_json()
        return {
            "seed": self.seed,
            "seconds": round(self.seconds, 1),
            "fault_seconds": round(self.fault_seconds, 1),
            "fault_cycles": len(self.cycles),
            "faults_by_kind": {k: sum(1 for c in self.cycles if c.fault.kind == k) for k in KINDS
                               if any(c.fault.kind == k for c in self.cycles)},
            "recovery_s_by_kind": {k: {"n": len(v), "median": round(statistics.median(v), 2),
                                       "max": round(max(v), 2)} for k, v in sorted(by_kind.items())},
            "unrecovered": [c.to_json() for c in self.unrecovered],
            "workload_exit": self.workload_rc,
            "counts": rep.get("counts", {}),
            "anomalies": {k: len(v) for k, v in self.report.anomalies.items()},
            "client_findings": {k: len(v) for k, v in self.report.client.items()},
            "cluster_errors": self.cluster_errors,
            **self.extra,
        }

    def per_minute(self, count: str) -> float:
        """`count` (a checker count: "send-ok", "txn-commit") per minute of faults."""
        return self.report.counts.get(count, 0) * 60.0 / max(self.fault_seconds, 1.0)

    def failures(self) -> list[str]:
        """Everything that fails the campaign, each in a sentence; empty when it passed."""
        out = []
        if not self.cycles:
            out.append("no fault was injected")
        if self.workload_rc != 0:
            out.append(f"workload exit {self.workload_rc}")
        if self.unrecovered:
            out.append(f"the cluster never served again after {[c.to_json() for c in self.unrecovered]}")
        if self.cluster_errors:
            out.append(f"a broker misbehaved: {self.cluster_errors}")
        if not self.report.ok:
            out.append(f"anomalies: {self.summary()['anomalies']}")
        return out

    def ok(self) -> bool:
        return not self.failures()


class Prober:
    """Asks, from the admin link, whether the cluster serves: a fresh acks=all write to the probe
    topic, then a read_committed read that returns it."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                                  "message.timeout.ms": 5000, "log_level": 0})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-probe",
                                  "isolation.level": "read_committed", "enable.auto.commit": False,
                                  "fetch.wait.max.ms": 50, "log_level": 0})

    def once(self) -> bool:
        value = uuid.uuid4().hex.encode()
        got: list[Any] = []
        self.producer.produce(self.topic, value=value, partition=0,
                              on_delivery=lambda err, msg: got.append((err, msg.offset() if msg else None)))
        self.producer.flush(6)
        if not got or got[0][0] is not None:
            return False
        offset = got[0][1]
        try:
            self.consumer.assign([TopicPartition(self.topic, 0, offset)])
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                for m in self.consumer.consume(10, 0.5):
                    if m.error() is None and m.value() == value:
                        return True
        except KafkaException:
            return False
        return False

    def recovery(self, timeout: float) -> float | None:
        """Seconds until a probe succeeds, or None if none did within `timeout`."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.once():
                return time.monotonic() - t0
        return None

    def close(self) -> None:
        self.producer.flush(1)
        self.consumer.close()


def _create_topics(c: NetCluster, names: Sequence[tuple[str, int]]) -> None:
    admin = c.admin()
    futs = admin.create_topics([NewTopic(n, num_partitions=p, replication_factor=3,
                                         config={"min.insync.replicas": "2"}) for n, p in names],
                               request_timeout=30)
    for f in futs.values():
        f.result(60)
    for n, p in names:
        wait_visible(c.bootstrap, n, p, 60)


def run_campaign(
    directory: Path,
    *,
    seconds: float,
    seed: int,
    kinds: Sequence[str] = tuple(KINDS),
    hold: tuple[float, float] = (2.0, 8.0),
    gap: tuple[float, float] = (0.5, 2.0),
    broken: str | None = None,
    copier_values: int = 200,
    rate: float = 40.0,
    log: Any = None,
    every_kind: bool = False,
    request_timeout_ms: int = 0,
) -> Result:
    """Run one campaign in `directory` (made empty first). `broken` names a guarantee the brokers
    are told to break (KETCH_TEST_BREAK, storage/faults.py; docs/chaos.md) to prove the checker
    notices. With `every_kind` the faults go on past `seconds` until each of `kinds` has been
    inflicted once (the schedule brings every kind once before any twice)."""
    say = log or (lambda msg: print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", flush=True))
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    history, stop = directory / "history.jsonl", directory / "stop"
    env = dict(BROKER_ENV)
    if broken:
        env["KETCH_TEST_BREAK"] = broken
    schedule = iter(Schedule(seed, kinds, [1, 2, 3], PARTITIONS, hold))
    gaps = random.Random(seed + 1)  # the pauses between faults: a stream of their own
    cycles: list[Cycle] = []
    t_start = time.monotonic()
    cluster_errors: str | None = None
    fault_seconds = 0.0
    with Net([1, 2, 3]) as net:
        cluster = NetCluster(directory / "cluster", net, env=env)
        workload: subprocess.Popen[bytes] | None = None
        try:
            cluster.start(timeout=90)
            cluster.wait_listed(90)
            _create_topics(cluster, [("mixed", PARTITIONS), ("cin", PARTITIONS), ("cout", PARTITIONS),
                                     ("zombie", ZOMBIE_PARTITIONS), ("probe", 1)])
            say(f"cluster up on {net.tag} ({cluster.bootstrap}), seed {seed}, {seconds:.0f}s of faults "
                f"from {list(kinds)}")
            nemesis = Nemesis(cluster, "mixed")
            prober = Prober(cluster.bootstrap, "probe")
            wl_env = {**os.environ, "PYTHONPATH": f"{REPO_ROOT / 'tests'}{os.pathsep}{REPO_ROOT}",
                      "PYTHONUNBUFFERED": "1"}
            wl_log = (directory / "workload.log").open("wb")
            workload = subprocess.Popen(
                [*net.exec_prefix(CLIENT), sys.executable, "-m", "helpers.chaos.workload",
                 "--bootstrap", cluster.bootstrap, "--history", str(history), "--stop", str(stop),
                 "--seed", str(seed), "--partitions", str(PARTITIONS), "--rate", str(rate),
                 "--copier-values", str(copier_values), "--request-timeout-ms", str(request_timeout_ms)],
                cwd=REPO_ROOT, env=wl_env, stdout=wl_log, stderr=subprocess.STDOUT)
            cluster.wait_until(lambda: workload is not None and (workload.poll() is not None or _started(history)),
                               timeout=120, message="workload to start")
            if workload.poll() is not None:
                raise RuntimeError(f"workload exited with {workload.returncode}: "
                                   f"{(directory / 'workload.log').read_text()[-3000:]}")
            fault_start = time.monotonic()
            fault_end = fault_start + seconds
            n = 0
            while workload.poll() is None and (time.monotonic() < fault_end or (every_kind and n < len(kinds))):
                n += 1
                fault = next(schedule)
                cycle = nemesis.inflict(n, fault)
                cycles.append(cycle)
                _hold(cluster, fault.hold)
                nemesis.heal(cycle)
                cycle.recovery_s = prober.recovery(RECOVERY_TIMEOUT)
                say(f"cycle {n}: {fault.kind} on {cycle.target} for {fault.hold}s "
                    f"{cycle.detail or ''} -> serving again after "
                    f"{'NEVER' if cycle.recovery_s is None else f'{cycle.recovery_s:.1f}s'}")
                _append(directory / "nemesis.jsonl", cycle.to_json())
                _hold(cluster, round(gaps.uniform(*gap), 2))
            nemesis.heal()
            fault_seconds = time.monotonic() - fault_start
            prober.recovery(RECOVERY_TIMEOUT)
            prober.close()
            stop.touch()
            say("faults over; workload draining")
            rc = _wait_exit(workload, 600)
            wl_log.close()
            for topic in ("mixed", "cin", "cout"):
                _append(history, batches_op(topic, [(n, d) for n, b in cluster.brokers.items()
                                                    for d in b.data_dir.glob(f"{topic}-*")]))
        finally:
            if workload is not None and workload.poll() is None:
                workload.kill()
                workload.wait(10)
            try:
                cluster.close()
            except AssertionError as exc:  # a broker that died on its own or ignored SIGTERM: fails the run
                cluster_errors = str(exc)
                (directory / "cluster-errors.txt").write_text(cluster_errors)
    report = checker.check(checker.load(history))
    result = Result(seed, directory, report, cycles, rc, time.monotonic() - t_start, _workload_end(history),
                    cluster_errors, fault_seconds)
    (directory / "report.json").write_text(json.dumps({"summary": result.summary(),
                                                       "cycles": [c.to_json() for c in cycles],
                                                       "check": report.to_json()}, indent=1))
    (directory / "report.md").write_text(render(result))
    say(f"done: {len(cycles)} fault cycles, anomalies {result.summary()['anomalies'] or 'none'}")
    return result


def _workload_end(history: Path) -> dict[str, Any]:
    """What the workload's closing note says about its clients (errors seen, copier stalls)."""
    end: dict[str, Any] = {}
    with history.open() as f:
        for line in f:
            if line.startswith('{"f":"note","what":"end"'):
                end = json.loads(line)
    return {"copier_stalls": end.get("copier_stalls"), "client_errors": end.get("errors")}


def _started(history: Path) -> bool:
    try:
        with history.open() as f:
            return any('"what":"started"' in line for line in f)
    except FileNotFoundError:
        return False


def _hold(cluster: NetCluster, seconds: float) -> None:
    """Keep a fault in place (or the cluster quiet) for `seconds`: the duration is the fault itself,
    nothing is synchronised on it. A broker dying on its own ends the campaign at once."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for b in cluster:
            if b.died_unexpectedly():
                raise AssertionError(f"{b!r} died on its own\n{b.log_tail()}")
        time.sleep(min(0.2, max(0.0, end - time.monotonic())))


def _wait_exit(p: subprocess.Popen[bytes], timeout: float) -> int:
    try:
        return p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(10)
        return -9


def _append(path: Path, obj: Mapping[str, Any]) -> None:
    with path.open("a") as f:
        f.write(json.dumps(obj) + "\n")


def render(result: Result) -> str:
    s = result.summary()
    lines = [f"# Chaos campaign, seed {s['seed']}", "",
             f"- {s['seconds']} s in all, {s['fault_cycles']} fault cycles, workload exit {s['workload_exit']}",
             f"- faults: {s['faults_by_kind']}",
             f"- operations: {s['counts']}",
             f"- anomalies: {s['anomalies'] or 'none'}",
             f"- findings attributed to the client, not anomalies: {s['client_findings'] or 'none'}",
             f"- faults after which the cluster never served again: {len(s['unrecovered'])}",
             f"- brokers that died on their own or ignored SIGTERM: {s['cluster_errors'] or 'none'}",
             f"- copier stalls (each also a `stall` anomaly): {s.get('copier_stalls')}",
             f"- client errors seen (and handled) by the workload: {s.get('client_errors')}", "",
             "| fault | cycles | median recovery s | max recovery s |", "|---|---|---|---|"]
    for k, v in s["recovery_s_by_kind"].items():
        lines.append(f"| {k} | {v['n']} | {v['median']} | {v['max']} |")
    lines += ["", "## Checker", "", "```", result.report.render(), "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="A chaos campaign against a 3-broker Ketch cluster")
    ap.add_argument("--seconds", type=float, default=3600, help="how long faults are injected")
    ap.add_argument("--seed", type=int, default=None, help="replays a campaign's fault schedule")
    ap.add_argument("--dir", default="chaos-runs", help="campaign directory (history, logs, report)")
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated fault kinds")
    ap.add_argument("--broken", default=None, help="KETCH_TEST_BREAK guarantee to break (checker self-test)")
    args = ap.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the brokers, the workload and the namespaces are cleaned up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(3), "big")
    directory = Path(args.dir) / f"seed-{seed}"
    result = run_campaign(directory, seconds=args.seconds, seed=seed, kinds=args.kinds.split(","),
                          hold=(3.0, 15.0), broken=args.broken)
    print(render(result))
    print(f"report: {directory / 'report.md'}")
    return 0 if result.ok() else 1
