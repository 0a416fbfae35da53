"""Throughput benchmark: Ketch against librdkafka's built-in mock cluster, same client, same settings.

    python -m bench.throughput --out bench/results.json [--messages N] [--only SCENARIO ...]
                               [--targets mock,ketch,ketch-2dirs,ketch-3]

Scenarios (see docs/bench.md):
  produce      100-byte messages, acks=all, linger.ms=5, enable.idempotence=false
  idempotent   the same with enable.idempotence=true
  consume      read_committed consumer reads N messages (produced beforehand, untimed) from the start
  rss          resident memory of an idle Ketch broker, empty and with 10 topics x 100 partitions

Each throughput scenario runs against every target, one after the other, in the same run: the mock
cluster first, then a Ketch broker subprocess (data in a temporary directory on disk), and with
``--targets ...,ketch-3`` three Ketch brokers in one cluster (topics RF 3, min.insync.replicas 2;
bench/cluster.py), with ``ketch-2dirs`` one broker with two log directories (log_dirs; both in one
temporary directory, so on one disk). Results go to a JSON file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from .cluster import KetchCluster
from .targets import QUIET, REPO_ROOT, KetchBroker, MockCluster, Target, log

SCENARIOS = ("produce", "idempotent", "consume", "rss")
# In the order they run: the mock first, since its auto-created topic fixes the partition count.
TARGETS = ("mock", "ketch", "ketch-2dirs", "ketch-3")
DEFAULT_TARGETS = "mock,ketch"
MESSAGE_BYTES = 100
LINGER_MS = 5


def make_target(name: str, partitions: int, env: dict[str, str], repo: Path = REPO_ROOT) -> Target:
    """A started target by its name in TARGETS (`repo`: whose broker runs, for a reference run)."""
    if name == "mock":
        return MockCluster()
    if name == "ketch":
        return KetchBroker(partitions, env=env, repo=repo)
    if name == "ketch-2dirs":
        return KetchBroker(partitions, env=env, repo=repo, log_dirs=2)
    if name == "ketch-3":
        return KetchCluster(partitions, env, size=3, min_insync=2, repo=repo)
    raise ValueError(f"unknown target {name!r}; one of {', '.join(TARGETS)}")


def parse_targets(value: str) -> list[str]:
    """`--targets` as a list in run order (the mock first), so that a partition count set by the
    mock applies to every Ketch target."""
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in TARGETS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"targets are a comma-separated subset of {','.join(TARGETS)}")
    return [t for t in TARGETS if t in names]


# --------------------------------------------------------------------------------------------- scenarios
def _percentiles(samples_ms: array) -> dict[str, float]:
    if not samples_ms:
        return {}
    s = sorted(samples_ms)

    def pct(q: float) -> float:
        return round(s[min(len(s) - 1, int(q * len(s)))], 3)

    return {
        "p50": pct(0.50),
        "p90": pct(0.90),
        "p99": pct(0.99),
        "p999": pct(0.999),
        "max": round(s[-1], 3),
        "mean": round(statistics.fmean(s), 3),
    }


def run_produce(target: Target, n: int, idempotent: bool, timeout: float) -> dict[str, Any]:
    """Produce n messages of MESSAGE_BYTES bytes; time from first produce() to the last delivery report."""
    topic = f"bench-{'idem' if idempotent else 'plain'}-{uuid.uuid4().hex[:8]}"
    target.prepare_topic(topic)
    sent_at = array("d", bytes(8 * n))
    latency_ms = array("d")
    errors: list[KafkaError] = []
    now = time.perf_counter

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            errors.append(err)
            return
        seq = int(msg.value()[:10])
        latency_ms.append((now() - sent_at[seq]) * 1000.0)

    p = Producer(
        {
            "bootstrap.servers": target.bootstrap,
            "acks": "all",
            "linger.ms": LINGER_MS,
            "enable.idempotence": idempotent,
            "on_delivery": on_delivery,
            "message.timeout.ms": int(timeout * 1000),
            **QUIET,
        }
    )
    # warm-up: metadata and connections established before the clock starts
    p.produce(topic, value=b"w" * MESSAGE_BYTES, on_delivery=lambda e, m: None)
    if p.flush(30) != 0:
        raise RuntimeError("warm-up message not delivered")
    pad = b"x" * (MESSAGE_BYTES - 10)
    produce = p.produce
    deadline = time.monotonic() + timeout
    start = now()
    for seq in range(n):
        value = b"%010d" % seq + pad
        while True:
            try:
                sent_at[seq] = now()
                produce(topic, value)
                break
            except BufferError:
                p.poll(0.005)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"producer queue full past the {timeout}s deadline") from None
        if seq % 1000 == 0:
            p.poll(0)
    left = p.flush(max(1.0, deadline - time.monotonic()))
    elapsed = now() - start
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first: {errors[0]}")
    if left:
        raise TimeoutError(f"{left} messages undelivered after {timeout}s")
    return {
        "messages": n,
        "elapsed_s": round(elapsed, 4),
        "msgs_per_s": round(n / elapsed, 1),
        "mb_per_s": round(n * MESSAGE_BYTES / elapsed / 1e6, 3),
        "latency_ms": _percentiles(latency_ms),
        "partitions": target.partitions,
    }


CONSUME_ROUNDS = 5


def run_consume(target: Target, n: int, timeout: float) -> dict[str, Any]:
    """read_committed consumers read n messages from the beginning of every partition (assign, no
    group), CONSUME_ROUNDS times, each with a new consumer; the median round is the figure (the goal is
    stated over five rounds)."""
    topic = f"bench-consume-{uuid.uuid4().hex[:8]}"
    target.prepare_topic(topic)
    p = Producer({"bootstrap.servers": target.bootstrap, "acks": "all", "linger.ms": LINGER_MS, **QUIET})
    pad = b"x" * (MESSAGE_BYTES - 10)
    deadline = time.monotonic() + timeout
    for seq in range(n):
        while True:
            try:
                p.produce(topic, b"%010d" % seq + pad)
                break
            except BufferError:
                p.poll(0.005)
                if time.monotonic() > deadline:
                    raise TimeoutError("producer queue full while loading the consume topic") from None
    if p.flush(max(1.0, deadline - time.monotonic())) != 0:
        raise TimeoutError("could not load the consume topic in time")
    reads = sorted((_read_all(target, topic, n, timeout) for _ in range(CONSUME_ROUNDS)), key=lambda r: r["msgs_per_s"])
    return {**reads[len(reads) // 2], "messages_produced": n, "partitions": target.partitions,
            "rounds_msgs_per_s": [r["msgs_per_s"] for r in reads]}


def _read_all(target: Target, topic: str, n: int, timeout: float) -> dict[str, Any]:
    """One read of the whole topic by a new consumer, timed to its last message."""
    c = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",  # required by the client; offsets never committed
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            # librdkafka >= 2.2 pauses a partition's fetching this long (default 1 s) once its local
            # queue holds queued.min.messages; with the default, one read of the same messages took
            # 0.64, 1.1 or 1.65 s at random, on either target alike, and the ratio swung 0.4-2.6.
            "fetch.queue.backoff.ms": 1,
            **QUIET,
        }
    )
    try:
        parts = set(range(target.partitions))
        # The mock keeps only the newest ~5 MB per partition: read what the target actually retains.
        retained = 0
        for i in parts:
            low, high = c.get_watermark_offsets(TopicPartition(topic, i), timeout=30)
            retained += high - low
        if retained > n:
            raise RuntimeError(f"{target.name} holds {retained} messages, {n} were produced")
        got = 0
        first_s = elapsed = 0.0
        nbytes = 0
        eof: set[int] = set()
        deadline = time.monotonic() + timeout
        start = time.perf_counter()
        c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in parts])
        while got < retained or eof != parts:  # then every partition's end, to see nothing more comes
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {got}/{retained} messages in {timeout}s")
            for m in c.consume(10_000, 0.5):
                err = m.error()
                part = m.partition()
                if err is None:
                    if got == 0:
                        first_s = time.perf_counter() - start
                    got += 1
                    nbytes += len(m.value() or b"")
                    eof.discard(part)
                    if got == retained:
                        elapsed = time.perf_counter() - start
                elif err.code() == KafkaError._PARTITION_EOF and part is not None:
                    eof.add(part)
                else:
                    raise KafkaException(err)
    finally:
        c.close()
    if got != retained:
        raise RuntimeError(f"consumed {got} messages, expected {retained}")
    return {
        "messages": got,
        "elapsed_s": round(elapsed, 4),
        "msgs_per_s": round(got / elapsed, 1),
        "mb_per_s": round(nbytes / elapsed / 1e6, 3),
        "time_to_first_message_s": round(first_s, 4),
    }


def run_rss(topics: int = 10, partitions: int = 100) -> dict[str, Any]:
    broker = KetchBroker(partitions=1)
    try:
        # nothing to wait for: the broker accepts connections; sample its idle RSS a few times
        empty = sample_rss(broker)
        names = [f"bench-rss-{i}-{uuid.uuid4().hex[:6]}" for i in range(topics)]
        t0 = time.perf_counter()
        broker.create_topics(names, partitions)
        create_s = time.perf_counter() - t0
        loaded = sample_rss(broker)
        return {
            "topics": topics,
            "partitions_per_topic": partitions,
            "total_partitions": topics * partitions,
            "create_topics_s": round(create_s, 3),
            "rss_empty_kib": empty,
            "rss_idle_partitions_kib": loaded,
            "rss_per_partition_kib": round((loaded - empty) / (topics * partitions), 2),
        }
    finally:
        broker.close()


def sample_rss(broker: KetchBroker, samples: int = 5, interval: float = 0.2) -> int:
    """Max VmRSS over a short idle window (samples x interval seconds)."""
    values = []
    for i in range(samples):
        values.append(broker.rss_kib())
        if i + 1 < samples:
            time.sleep(interval)  # measurement cadence, not synchronisation
    return max(values)


# ------------------------------------------------------------------------------------------------- main
def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "confluent_kafka": _version_str(confluent_kafka.version()),
        "librdkafka": confluent_kafka.libversion()[0],
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                info["mem_total_kib"] = int(line.split()[1])
                break
    except OSError:
        pass
    info["ketch_commit"] = git_commit()
    return info


def _version_str(v: object) -> str:
    return str(v[0]) if isinstance(v, tuple) else str(v)


@contextmanager
def reference_checkout(rev: str) -> Iterator[Path]:
    """A detached worktree of `rev`, so a reference broker runs side by side with this checkout
    in the same run (figures of different runs are not comparable on a shared machine)."""
    d = Path(tempfile.mkdtemp(prefix="ketch-ref-"))
    subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "add", "--detach", "-q", str(d), rev], check=True)
    try:
        yield d
    finally:
        subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "remove", "--force", str(d)], check=False)
        shutil.rmtree(d, ignore_errors=True)


def git_commit(repo: Path = REPO_ROOT, rev: str = "HEAD") -> str | None:
    """The commit a checkout (or a revision) is at, as git says (a worktree's .git is a file
    naming the real one)."""
    try:
        return subprocess.run(["git", "-C", str(repo), "rev-parse", rev], check=True, capture_output=True,
                              text=True).stdout.strip() or None
    except (OSError, subprocess.CalledProcessError):
        return None


def _ratios(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float] | None:
    """a over b: throughput, and produce latency where both have it (higher latency ratio = slower)."""
    if "msgs_per_s" not in a or "msgs_per_s" not in b:
        return None
    out = {"msgs_per_s": round(a["msgs_per_s"] / b["msgs_per_s"], 4)}
    if a.get("latency_ms") and b.get("latency_ms"):
        for q in ("p50", "p99"):
            out[f"latency_{q}"] = round(a["latency_ms"][q] / b["latency_ms"][q], 3)
    return out


def _with_targets(
    scenario: str,
    targets: list[str],
    fn: Callable[[Target], dict[str, Any]],
    partitions_hint: list[int],
    ketch_env: dict[str, str],
    after_mock: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in targets:
        target: Target | None = None
        try:
            target = make_target(name, partitions_hint[0], ketch_env)
            log(f"{scenario}: running against {name} ({target.bootstrap})")
            res = fn(target)
            res.update(target.replication_report())
            if name == "mock":
                partitions_hint[0] = res["partitions"]
                if after_mock is not None:
                    after_mock(res)
            out[name] = res
            log(f"{scenario} {name}: {res['msgs_per_s']:.0f} msg/s, {res['mb_per_s']:.2f} MB/s")
        except Exception as exc:  # record and continue with the next target/scenario
            detail = f"{type(exc).__name__}: {exc}"
            if target is not None and target.log_tail():
                detail += "\n" + target.log_tail()
            out[name] = {"error": detail}
            log(f"{scenario} {name} FAILED: {detail}")
        finally:
            if target is not None:
                target.close()
    for key, a, b in (("ratio_ketch_over_mock", "ketch", "mock"),
                      ("ratio_ketch2dirs_over_ketch", "ketch-2dirs", "ketch"),
                      ("ratio_ketch3_over_ketch", "ketch-3", "ketch"),
                      ("ratio_ketch3_over_mock", "ketch-3", "mock")):  # fmt: skip
        r = _ratios(out.get(a, {}), out.get(b, {}))
        if r is not None:
            out[key] = r
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=500_000, help="messages per scenario (default 500000)")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "bench" / "results.json", help="JSON output file")
    ap.add_argument(
        "--only", action="append", choices=SCENARIOS, help="run only this scenario (repeatable); default: all"
    )
    ap.add_argument("--timeout", type=float, default=900, help="deadline per scenario and target, seconds")
    ap.add_argument(
        "--ketch-env",
        action="append",
        default=[],
        metavar="KETCH_SETTING=VALUE",
        help="extra environment for every Ketch broker (repeatable), e.g. KETCH_FLUSH_MESSAGES=1",
    )
    ap.add_argument(
        "--targets",
        type=parse_targets,
        default=parse_targets(DEFAULT_TARGETS),
        metavar="T1,T2",
        help=f"what to measure, a subset of {','.join(TARGETS)} (default {DEFAULT_TARGETS}); ketch-3 is three "
        "brokers, topics RF 3 and min.insync.replicas 2; ketch-2dirs one broker with two log directories",
    )
    args = ap.parse_args(argv)
    if args.messages <= 0:
        ap.error("--messages must be positive")
    ketch_env = dict(kv.split("=", 1) for kv in args.ketch_env)
    chosen = args.only or list(SCENARIOS)

    result: dict[str, Any] = {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_info(),
        "settings": {
            "messages": args.messages,
            "message_bytes": MESSAGE_BYTES,
            "acks": "all",
            "linger_ms": LINGER_MS,
            "client": "confluent-kafka (librdkafka), one producer / one consumer in this process",
            "ketch_env": ketch_env,
            "mock": "librdkafka test.mock.num.brokers=1 (in-process)",
            "ketch-3": "3 Ketch brokers, one quorum; topics replication_factor 3, min.insync.replicas 2",
            "ketch-2dirs": "1 Ketch broker with 2 log directories (log_dirs) on the same disk",
            "targets": args.targets,
            "rss": "one Ketch broker only, whatever --targets says",
        },
        "scenarios": {},
    }
    partitions_hint = [4]
    n, t = args.messages, args.timeout
    runners: dict[str, Callable[[Target], dict[str, Any]]] = {
        "produce": lambda tg: run_produce(tg, n, idempotent=False, timeout=t),
        "idempotent": lambda tg: run_produce(tg, n, idempotent=True, timeout=t),
        "consume": lambda tg: run_consume(tg, consume_n[0], timeout=t),
    }

    def cap_consume(mock_result: dict[str, Any]) -> None:
        # Ketch consumes exactly as many messages as the mock retained (its per-partition size cap)
        consume_n[0] = mock_result["messages"]

    consume_n = [n]
    failed = False
    for scenario in chosen:
        if scenario == "rss":
            log("rss: 10 topics x 100 partitions on an idle Ketch broker")
            try:
                result["rss"] = run_rss()
                log(f"rss: {result['rss']}")
            except Exception as exc:
                result["rss"] = {"error": f"{type(exc).__name__}: {exc}"}
                failed = True
                log(f"rss FAILED: {exc}")
            continue
        res = _with_targets(
            scenario,
            args.targets,
            runners[scenario],
            partitions_hint,
            ketch_env,
            cap_consume if scenario == "consume" else None,
        )
        failed |= any("error" in v for v in res.values() if isinstance(v, dict))
        result["scenarios"][scenario] = res

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    log(f"wrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
