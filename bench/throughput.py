"""Throughput benchmark: Ketch against librdkafka's built-in mock cluster, same client, same settings.

    python -m bench.throughput --out bench/results.json [--messages N] [--only SCENARIO ...]

Scenarios (see docs/bench.md):
  produce      100-byte messages, acks=all, linger.ms=5, enable.idempotence=false
  idempotent   the same with enable.idempotence=true
  consume      read_committed consumer reads N messages (produced beforehand, untimed) from the start
  rss          resident memory of an idle Ketch broker, empty and with 10 topics x 100 partitions

Each throughput scenario runs against a Ketch broker subprocess (data in a temporary directory on disk)
and against the mock cluster, in this order, in the same run. Results go to a JSON file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
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
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("produce", "idempotent", "consume", "rss")
MESSAGE_BYTES = 100
LINGER_MS = 5
QUIET = {"log_level": 3}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------- targets
class Target:
    name: str
    bootstrap: str
    partitions: int

    def prepare_topic(self, topic: str) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class MockCluster(Target):
    """librdkafka's in-process mock cluster.

    A client configured with ``test.mock.num.brokers`` starts a mock cluster inside itself and ignores
    ``bootstrap.servers``. The mock's brokers listen on real loopback ports, which that client's
    metadata reports: ``list_topics().brokers`` gives their host:port, usable by any other client as
    ``bootstrap.servers`` while the owning client lives. The mock does not implement CreateTopics;
    it auto-creates a topic on its first Metadata request, with 4 partitions (librdkafka's default).
    """

    name = "mock"

    def __init__(self) -> None:
        self._owner = Producer({"test.mock.num.brokers": 1, **QUIET})
        md = self._owner.list_topics(timeout=10)
        brokers = list(md.brokers.values())
        if not brokers:
            raise RuntimeError("mock cluster reported no brokers")
        self.bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers)
        self.partitions = 0

    def prepare_topic(self, topic: str) -> None:
        md = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET}).list_topics(topic=topic, timeout=10)
        t = md.topics[topic]
        if t.error is not None:
            raise RuntimeError(f"mock auto-create of {topic} failed: {t.error}")
        self.partitions = len(t.partitions)

    def close(self) -> None:
        self._owner.flush(5)
        del self._owner  # destroying the owning client tears the mock cluster down


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class KetchBroker(Target):
    """A Ketch broker subprocess with its data in a temporary directory, stopped with SIGTERM."""

    name = "ketch"

    def __init__(self, partitions: int, env: dict[str, str] | None = None, start_timeout: float = 60,
                 repo: Path = REPO_ROOT) -> None:
        """`repo`: the checkout whose broker runs (another one than this, for a reference run)."""
        self.dir = Path(tempfile.mkdtemp(prefix="ketch-bench-"))
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.partitions = partitions
        self.env = dict(env or {})
        self.log_path = self.dir / "broker.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in close()
        cmd = [
            sys.executable, "-m", "broker", "broker",
            "--listen", self.bootstrap, "--advertise", self.bootstrap, "--data-dir", str(self.dir / "data"),
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd,
            cwd=repo,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(repo), **self.env},
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + start_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ketch exited with {self.proc.returncode} at start\n{self.log_tail()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(
                        f"ketch did not listen within {start_timeout}s\n{self.log_tail()}"
                    ) from None
                time.sleep(0.05)  # polling interval of the readiness check

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})

    def create_topics(self, names: list[str], partitions: int, timeout: float = 120) -> None:
        client = self.admin()  # must outlive the futures: destroying it cancels the request
        futs = client.create_topics(
            [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names],
            request_timeout=timeout,
        )
        for f in futs.values():
            f.result(timeout)
        deadline = time.monotonic() + timeout
        pending = set(names)
        while pending:
            md = self.admin().list_topics(timeout=30)
            pending = {
                n
                for n in pending
                if n not in md.topics
                or md.topics[n].error is not None
                or len(md.topics[n].partitions) != partitions
            }
            if pending and time.monotonic() > deadline:
                raise RuntimeError(f"topics not visible in metadata after {timeout}s: {sorted(pending)[:5]}")
            if pending:
                time.sleep(0.1)  # polling interval

    def prepare_topic(self, topic: str) -> None:
        self.create_topics([topic], self.partitions)

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def log_tail(self, n: int = 40) -> str:
        self._log.flush()
        lines = self.log_path.read_bytes().decode("utf-8", "replace").splitlines()[-n:]
        return "\n".join(lines)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                log("ketch ignored SIGTERM for 30s; killing it")
                self.proc.kill()
                self.proc.wait(10)
        if not self._log.closed:
            self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


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


def run_consume(target: Target, n: int, timeout: float) -> dict[str, Any]:
    """read_committed consumer reads n messages from the beginning of every partition (assign, no group)."""
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

    c = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",  # required by the client; offsets never committed
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
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
        first_s = 0.0
        nbytes = 0
        eof: set[int] = set()
        deadline = time.monotonic() + timeout
        start = time.perf_counter()
        c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in parts])
        while got < retained or eof != parts:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {got}/{retained} messages in {timeout}s")
            for m in c.consume(10_000, 0.5):
                err = m.error()
                if err is None:
                    if got == 0:
                        first_s = time.perf_counter() - start
                    got += 1
                    nbytes += len(m.value())
                    eof.discard(m.partition())
                elif err.code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                else:
                    raise KafkaException(err)
        elapsed = time.perf_counter() - start
    finally:
        c.close()
    if got != retained:
        raise RuntimeError(f"consumed {got} messages, expected {retained}")
    return {
        "messages": got,
        "messages_produced": n,
        "elapsed_s": round(elapsed, 4),
        "msgs_per_s": round(got / elapsed, 1),
        "mb_per_s": round(nbytes / elapsed / 1e6, 3),
        "time_to_first_message_s": round(first_s, 4),
        "partitions": target.partitions,
    }


def run_rss(topics: int = 10, partitions: int = 100) -> dict[str, Any]:
    broker = KetchBroker(partitions=1)
    try:
        # nothing to wait for: the broker accepts connections; sample its idle RSS a few times
        empty = _sample_rss(broker)
        names = [f"bench-rss-{i}-{uuid.uuid4().hex[:6]}" for i in range(topics)]
        t0 = time.perf_counter()
        broker.create_topics(names, partitions)
        create_s = time.perf_counter() - t0
        loaded = _sample_rss(broker)
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


def _sample_rss(broker: KetchBroker, samples: int = 5, interval: float = 0.2) -> int:
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
    info["ketch_commit"] = _git_head()
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


def _git_head() -> str | None:
    """The checked-out commit, read from .git without running git."""
    git = REPO_ROOT / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        if (git / ref).exists():
            return (git / ref).read_text().strip()
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    except OSError:
        return None
    return None


def _with_targets(
    scenario: str,
    fn: Callable[[Target], dict[str, Any]],
    partitions_hint: list[int],
    ketch_env: dict[str, str],
    after_mock: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # mock first: it fixes the partition count (its auto-create default) that Ketch then uses too
    for name in ("mock", "ketch"):
        target: Target | None = None
        try:
            target = MockCluster() if name == "mock" else KetchBroker(partitions_hint[0], env=ketch_env)
            log(f"{scenario}: running against {name} ({target.bootstrap})")
            res = fn(target)
            if name == "mock":
                partitions_hint[0] = res["partitions"]
                if after_mock is not None:
                    after_mock(res)
            out[name] = res
            log(f"{scenario} {name}: {res['msgs_per_s']:.0f} msg/s, {res['mb_per_s']:.2f} MB/s")
        except Exception as exc:  # record and continue with the next target/scenario
            detail = f"{type(exc).__name__}: {exc}"
            if isinstance(target, KetchBroker):
                detail += "\n" + target.log_tail()
            out[name] = {"error": detail}
            log(f"{scenario} {name} FAILED: {detail}")
        finally:
            if target is not None:
                target.close()
    k, m = out.get("ketch", {}), out.get("mock", {})
    if "msgs_per_s" in k and "msgs_per_s" in m:
        out["ratio_ketch_over_mock"] = {
            "msgs_per_s": round(k["msgs_per_s"] / m["msgs_per_s"], 4),
        }
        if k.get("latency_ms") and m.get("latency_ms"):
            out["ratio_ketch_over_mock"]["latency_p50"] = round(
                k["latency_ms"]["p50"] / m["latency_ms"]["p50"], 3
            )
            out["ratio_ketch_over_mock"]["latency_p99"] = round(
                k["latency_ms"]["p99"] / m["latency_ms"]["p99"], 3
            )
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
        help="extra environment for the Ketch broker (repeatable), e.g. KETCH_FLUSH_MESSAGES=1",
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
