"""Event-loop stalls of a 3-broker cluster under a produce + transactions load (issue 24's goal
"no disk I/O on the event loop": 0 stalls of 100 ms or more over 10 minutes).

    python -m bench.stalls [--minutes 10] [--reference REV] [--out bench/results-stalls.json]
                           [--rate 2000] [--txn-size 10]

Three Ketch brokers started as bench/cluster.py starts them (one quorum, topics RF 3 and
min.insync.replicas 2, `__transaction_state` RF 3), each with a /metrics endpoint, carry for
--minutes (default 10):
  produce   one producer, acks=all, linger.ms 5, 100-byte messages at --rate messages/s over 4
            partitions; each message's latency is produce() to its delivery report
  txn       one transactional producer, transactions of --txn-size messages back to back
With --new-partitions N, a topic of N partitions (RF 3) is also created as the measured window
opens (the fuzzer's 514 made each broker open 514 logs on its loop: docs/storage.md "What runs
off the loop"); how long the CreateTopics answer took is recorded beside the stalls.
Each broker's /metrics is read before and after: ketch_event_loop_stalls_total (the loop held
1 s or more) and ketch_event_loop_stalls_100ms_total (100 ms or more; null for a revision
without that counter). Beside it, for every revision alike, a probe per broker sends an
ApiVersions request every 50 ms on a connection of its own and counts answers that took 100 ms
or more and 1 s or more: a broker whose loop is held answers late. The probe runs in this
process, which shares the machine's cores with the brokers and the producers, so its own
scheduling adds to what it sees: read it next to the brokers' counters, not instead of them.

With --reference REV the brokers of that git revision (a temporary worktree) run the same load
next, in the same run: the figures side by side. The machine is shared (the 2-core machine of
docs/bench.md also runs tests): /proc/loadavg is recorded before and after each run, and a
comparison means something only when they are alike.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import socket
import struct
import sys
import threading
import time
import urllib.request
import uuid
from array import array
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .cluster import HOST, KetchCluster
from .targets import QUIET, REPO_ROOT, log, recv_exactly
from .throughput import LINGER_MS, MESSAGE_BYTES, _percentiles, git_commit, machine_info, reference_checkout

PARTITIONS = 4
PROBE_EVERY_S = 0.05
STALL_METRICS = {
    "stalls_1s": "ketch_event_loop_stalls_total",
    "stall_1s_seconds": "ketch_event_loop_stall_seconds_total",
    "stalls_100ms": "ketch_event_loop_stalls_100ms_total",
    "stall_100ms_seconds": "ketch_event_loop_stall_100ms_seconds_total",
}
_SAMPLE = re.compile(r"^([a-z0-9_]+) ([0-9.eE+-]+)$")


def scrape(port: int) -> dict[str, float]:
    """The unlabelled samples of a broker's /metrics."""
    with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=30) as resp:  # noqa: S310 - local
        return samples(resp.read().decode())


def samples(text: str) -> dict[str, float]:
    """Name -> value of the samples without labels in a Prometheus text exposition."""
    out = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def _stuck(broker_log: Path, since: str, limit: int = 10) -> list[str]:
    """The broker's `event loop stuck` lines (with the stack that held the loop) logged at or
    after `since` (UTC, ISO 8601 as the broker's log lines give it), the first few."""
    try:
        text = broker_log.read_text(errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        if "event loop stuck" not in line:
            continue
        try:
            stamp = str(json.loads(line).get("timestamp", ""))
        except ValueError:
            stamp = ""
        if stamp >= since:
            out.append(line[:4000])
    return out[:limit]


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


class Probe(threading.Thread):
    """ApiVersions (v0) to one broker every PROBE_EVERY_S, on a connection of its own; notes how
    long each answer took."""

    def __init__(self, port: int, stop: threading.Event) -> None:
        super().__init__(name=f"probe-{port}", daemon=True)
        self.port, self.stop = port, stop
        self.answers_ms = array("d")
        self.failures = 0

    def run(self) -> None:
        sock: socket.socket | None = None
        correlation = 0
        while not self.stop.is_set():
            t0 = time.perf_counter()
            try:
                if sock is None:
                    sock = socket.create_connection((HOST, self.port), timeout=30)
                correlation += 1
                client = b"stall-probe"
                body = struct.pack(">hhih", 18, 0, correlation, len(client)) + client
                sock.sendall(struct.pack(">i", len(body)) + body)
                (size,) = struct.unpack(">i", recv_exactly(sock, 4))
                recv_exactly(sock, size)
                self.answers_ms.append((time.perf_counter() - t0) * 1000)
            except OSError:
                self.failures += 1
                if sock is not None:
                    sock.close()
                sock = None
            self.stop.wait(max(0.0, PROBE_EVERY_S - (time.perf_counter() - t0)))  # the probe's pace
        if sock is not None:
            sock.close()

    def report(self) -> dict[str, Any]:
        a = self.answers_ms
        return {
            "answers": len(a),
            "failures": self.failures,
            "over_100ms": sum(1 for x in a if x >= 100),
            "over_1s": sum(1 for x in a if x >= 1000),
            "latency_ms": _percentiles(a),
        }




class Transactions(threading.Thread):
    """Transactions of `size` messages back to back until stopped."""

    def __init__(self, bootstrap: str, topic: str, size: int, stop: threading.Event) -> None:
        super().__init__(name="transactions", daemon=True)
        self.bootstrap, self.topic, self.size, self.stop = bootstrap, topic, size, stop
        self.commit_ms = array("d")
        self.errors: list[str] = []

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": f"stalls-{uuid.uuid4().hex[:8]}",
                      "acks": "all", "linger.ms": LINGER_MS, **QUIET})
        p.init_transactions(60)
        value = b"t" * MESSAGE_BYTES
        while not self.stop.is_set():
            try:
                p.begin_transaction()
                for _ in range(self.size):
                    p.produce(self.topic, value)
                t0 = time.perf_counter()
                p.commit_transaction(60)
                self.commit_ms.append((time.perf_counter() - t0) * 1000)
            except KafkaException as e:
                self.errors.append(str(e.args[0]))
                with contextlib.suppress(KafkaException):
                    p.abort_transaction(60)

    def report(self) -> dict[str, Any]:
        return {"messages_per_txn": self.size, "committed": len(self.commit_ms), "errors": len(self.errors),
                "first_errors": self.errors[:5], "commit_ms": _percentiles(self.commit_ms)}


def produce_for(bootstrap: str, topic: str, seconds: float, rate: int) -> dict[str, Any]:
    """Messages at `rate` per second for `seconds`, acks=all; the latency of each."""
    latency_ms = array("d")
    errors: list[str] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(str(err))
            return
        (sent,) = struct.unpack_from(">d", msg.value() or b"\0" * 8)
        latency_ms.append((time.perf_counter() - sent) * 1000)

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": LINGER_MS,
                  "enable.idempotence": True, **QUIET})
    pad = b"p" * (MESSAGE_BYTES - 8)
    start = time.perf_counter()
    sent = 0
    while (elapsed := time.perf_counter() - start) < seconds:
        due = int(elapsed * rate) + 1  # what the rate asks for by now
        while sent < due:
            try:
                p.produce(topic, struct.pack(">d", time.perf_counter()) + pad, on_delivery=delivered)
                sent += 1
            except BufferError:
                p.poll(0.005)
        p.poll(0)
        time.sleep(0.01)  # the pace: the next 10 ms worth of messages
    left = p.flush(60)
    return {"rate_per_s": rate, "sent": sent, "delivered": len(latency_ms), "errors": len(errors),
            "undelivered": left, "first_errors": errors[:5], "latency_ms": _percentiles(latency_ms)}


class NewPartitions(threading.Thread):
    """Creates one topic of `count` partitions (RF 3) and times the answer."""

    def __init__(self, bootstrap: str, count: int) -> None:
        super().__init__(name="new-partitions", daemon=True)
        self.bootstrap, self.count = bootstrap, count
        self.result: dict[str, Any] = {"partitions": count}

    def run(self) -> None:
        client = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        start = time.monotonic()
        try:
            futs = client.create_topics([NewTopic(f"stalls-new-{uuid.uuid4().hex[:8]}", num_partitions=self.count,
                                                  replication_factor=3)], request_timeout=120)
            for f in futs.values():
                f.result(180)
            self.result["create_s"] = round(time.monotonic() - start, 3)
        except Exception as exc:
            self.result["error"] = f"{type(exc).__name__}: {exc}"


def run_cluster(label: str, repo: Path, minutes: float, rate: int, txn_size: int,
                new_partitions: int = 0) -> dict[str, Any]:
    log(f"{label}: starting 3 brokers")
    cluster = KetchCluster(PARTITIONS, size=3, min_insync=2, repo=repo, metrics=True)
    try:
        topic, txn_topic = f"stalls-{uuid.uuid4().hex[:8]}", f"stalls-txn-{uuid.uuid4().hex[:8]}"
        cluster.prepare_topic(txn_topic)
        cluster.prepare_topic(topic)
        stop = threading.Event()
        txns = Transactions(cluster.bootstrap, txn_topic, txn_size, stop)
        txns.start()
        # Not measured: creating __transaction_state (its 50 partitions open, each with a few
        # fsyncs, on every broker's loop: docs/storage.md "What runs off the loop") and the
        # first transaction's coordinator lookup.
        deadline = time.monotonic() + 120
        while not txns.commit_ms and not txns.errors:
            if time.monotonic() > deadline or not txns.is_alive():
                raise RuntimeError(f"no transaction committed within 120 s\n{cluster.log_tail()}")
            time.sleep(0.1)  # polling interval of the warm-up check
        before = {n.node_id: scrape(n.metrics_port) for n in cluster.nodes}
        window_start = _utc_now()
        probes = {n.node_id: Probe(n.port, stop) for n in cluster.nodes}
        for probe in probes.values():
            probe.start()
        creator = NewPartitions(cluster.bootstrap, new_partitions) if new_partitions else None
        if creator is not None:
            creator.start()
        load_before = loadavg()
        log(f"{label}: load for {minutes:g} min (load average {load_before})")
        produced = produce_for(cluster.bootstrap, topic, minutes * 60, rate)
        load_after = loadavg()
        stop.set()
        txns.join(90)
        for probe in probes.values():
            probe.join(30)
        if creator is not None:
            creator.join(180)
        after = {n.node_id: scrape(n.metrics_port) for n in cluster.nodes}
        stuck = {str(n.node_id): _stuck(n.log_path, window_start) for n in cluster.nodes}
        brokers = {}
        for node_id, b in before.items():
            a = after[node_id]
            row: dict[str, Any] = {key: (round(a[name] - b.get(name, 0.0), 3) if name in a else None)
                                   for key, name in STALL_METRICS.items()}
            row["probe"] = probes[node_id].report()
            row["stuck_logged"] = stuck[str(node_id)]  # where the loop was held a second or more, in the window
            brokers[str(node_id)] = row
        return {
            "commit": git_commit(repo),
            "minutes": minutes,
            "warm_up_transactions_excluded": True,
            "loadavg_before": load_before,
            "loadavg_after": load_after,
            "brokers": brokers,
            "produce": produced,
            "transactions": txns.report(),
            "replication": cluster.replication_report(),
            "new_partitions": creator.result if creator is not None else None,
        }
    finally:
        cluster.close()


def _line(label: str, r: dict[str, Any]) -> str:
    if "error" in r:
        return f"{label:10} FAILED: {r['error'].splitlines()[0]}"
    stalls = " ".join(f"b{k}:{v['stalls_100ms']}/{v['stalls_1s']}" for k, v in r["brokers"].items())
    probe = " ".join(f"b{k}:{v['probe']['over_100ms']}" for k, v in r["brokers"].items())
    lat = r["produce"]["latency_ms"]
    new = r.get("new_partitions")
    created = "" if not new else f" | {new['partitions']} new partitions in {new.get('create_s', new.get('error'))} s"
    return (f"{label:10} stalls >=100ms/>=1s {stalls} | probe >=100ms {probe} | produce p50 {lat.get('p50')} ms "
            f"p99 {lat.get('p99')} ms | {r['transactions']['committed']} txns | load {r['loadavg_before']} -> "
            f"{r['loadavg_after']}{created}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.stalls", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench/results-stalls.json")  # git-ignored
    ap.add_argument("--minutes", type=float, default=10.0, help="how long each cluster carries the load")
    ap.add_argument("--rate", type=int, default=2000, help="acks=all messages per second")
    ap.add_argument("--txn-size", type=int, default=10, help="messages per transaction")
    ap.add_argument("--reference", default=None, help="git revision whose brokers also run, after this checkout's")
    ap.add_argument("--new-partitions", type=int, default=0, help="create a topic of this many partitions as the window opens")
    args = ap.parse_args(argv)
    results: dict[str, Any] = {
        "machine": machine_info(),
        "settings": {"minutes": args.minutes, "rate_per_s": args.rate, "txn_size": args.txn_size,
                     "message_bytes": MESSAGE_BYTES, "linger_ms": LINGER_MS, "partitions": PARTITIONS,
                     "probe_every_ms": PROBE_EVERY_S * 1000, "ketch_commit": git_commit(REPO_ROOT),
                     "reference": args.reference, "new_partitions": args.new_partitions},
    }
    failed = False
    with contextlib.ExitStack() as stack:
        runs: list[tuple[str, Path]] = [("ketch-3", REPO_ROOT)]
        if args.reference:
            runs.append(("reference", stack.enter_context(reference_checkout(args.reference))))
        for label, repo in runs:
            try:
                results[label] = run_cluster(label, repo, args.minutes, args.rate, args.txn_size, args.new_partitions)
            except Exception as exc:
                results[label] = {"error": f"{type(exc).__name__}: {exc}"}
                log(f"{label} FAILED: {exc}")
                failed = True
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    for label in ("ketch-3", "reference"):
        if label in results:
            print(_line(label, results[label]))
    print(f"wrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
