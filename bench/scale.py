"""Scale benchmark (issue 24): how Ketch's figures grow with partitions, connections and log size.

    python -m bench.scale --out bench/results-scale.json [--only produce|connections|restart|partitions]
                          [--max-partitions N] [--restart-gb 1,2]

Scenarios (see docs/bench.md "Scale"), each independent, each recording its error rather than
ending the run:
  produce      msg/s of one broker over 1, 10, 100, 1,000 partitions (bench/throughput.py's producer)
  connections  the broker's RSS with 0, 100 and 1,000 idle connections that each did ApiVersions + Metadata
  restart      time until a broker answers Metadata and ListOffsets after SIGKILL / SIGTERM, per log size
  partitions   3 brokers: creating 1,000 .. N partitions RF 3, metadata size, controller failover, rejoin
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import struct
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from .cluster import HOST, KetchCluster, _Node
from .targets import QUIET, REPO_ROOT, KetchBroker, log, recv_exactly
from .throughput import git_commit, machine_info, run_produce, sample_rss

SCENARIOS = ("produce", "connections", "restart", "partitions")
POLL_S = 0.05  # interval between checks of a condition that has a deadline


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll `condition` until it holds; the seconds it took (a condition, never a fixed sleep)."""
    start = time.perf_counter()
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(POLL_S)
    return time.perf_counter() - start


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text exposition -> {name{labels}: value}, comments skipped."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            continue
    return out


# ----------------------------------------------------------------------------------------- produce
def scenario_produce(counts: list[int], messages: int, timeout: float) -> dict[str, Any]:
    """One broker per partition count (a fresh one each time, so that the 1,000-partition topic does
    not sit beside the 1-partition run). The mock is left out: it cannot create topics (it
    auto-creates them with 4 partitions), so it has no figure at 1, 10, 100 or 1,000."""
    out: dict[str, Any] = {"messages": messages, "mock": "skipped: the mock auto-creates 4 partitions only"}
    for n in counts:
        broker: KetchBroker | None = None
        try:
            broker = KetchBroker(partitions=n)
            t0 = time.perf_counter()
            broker.prepare_topic(f"scale-{n}")
            create_s = time.perf_counter() - t0
            res = run_produce(broker, messages, idempotent=False, timeout=timeout)
            res["create_topic_s"] = round(create_s, 3)
            res["load_average"] = load_average()
            res["rss_after_kib"] = broker.rss_kib()
            out[str(n)] = res
            log(f"produce {n} partitions: {res['msgs_per_s']:.0f} msg/s")
        except Exception as exc:
            out[str(n)] = {"error": f"{type(exc).__name__}: {exc}"}
            log(f"produce {n} FAILED: {exc}")
        finally:
            if broker is not None:
                broker.close()
    return out


# ------------------------------------------------------------------------------------- connections
def _request(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    client = b"scale"
    header = struct.pack(">hhih", api_key, version, corr, len(client)) + client
    return struct.pack(">i", len(header) + len(body)) + header + body


def _read_response(s: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exactly(s, 4))
    return recv_exactly(s, size)


def open_idle_connection(port: int) -> socket.socket:
    """A connection that did what a client does first (ApiVersions v0, Metadata v1 for all topics)
    and then stays idle."""
    s = socket.create_connection((HOST, port), timeout=30)
    s.sendall(_request(18, 0, 1, b""))
    _read_response(s)
    s.sendall(_request(3, 1, 2, struct.pack(">i", -1)))
    _read_response(s)
    return s


def scenario_connections(steps: list[int]) -> dict[str, Any]:
    broker = KetchBroker(partitions=1)
    socks: list[socket.socket] = []
    try:
        out: dict[str, Any] = {"rss_kib": {"0": sample_rss(broker)}}
        open_s: dict[str, float] = {}
        for n in steps:
            t0 = time.perf_counter()
            while len(socks) < n:
                socks.append(open_idle_connection(broker.port))
            open_s[str(n)] = round(time.perf_counter() - t0, 3)
            out["rss_kib"][str(n)] = sample_rss(broker)
            # every connection still open: one more round trip on the first and last proves it
            for s in (socks[0], socks[-1]):
                s.sendall(_request(18, 0, 3, b""))
                _read_response(s)
        base = out["rss_kib"]["0"]
        out["per_connection_kib"] = {str(n): round((out["rss_kib"][str(n)] - base) / n, 2) for n in steps}
        out["open_s"] = open_s
        out["load_average"] = load_average()
        out["fds_broker"] = len(os.listdir(f"/proc/{broker.proc.pid}/fd"))
        return out
    finally:
        for s in socks:
            s.close()
        broker.close()


# ----------------------------------------------------------------------------------------- restart
RESTART_PARTITIONS = 4
RESTART_MESSAGE = 64 * 1024


def _fill(broker: KetchBroker, topic: str, nbytes: int, timeout: float) -> dict[int, int]:
    """Produce nbytes in RESTART_MESSAGE messages, acks=all; the acknowledged end offset of each
    partition (last delivered offset + 1)."""
    acked: dict[int, int] = {}
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[msg.partition()] = max(acked.get(msg.partition(), 0), msg.offset() + 1)

    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5,
                  "batch.size": 1_000_000, "on_delivery": on_delivery, **QUIET})
    value = os.urandom(RESTART_MESSAGE)
    deadline = time.monotonic() + timeout
    for i in range(nbytes // RESTART_MESSAGE):
        while True:
            try:
                p.produce(topic, value, partition=i % RESTART_PARTITIONS)
                break
            except BufferError:
                p.poll(0.01)
                if time.monotonic() > deadline:
                    raise TimeoutError("producer queue full past the deadline") from None
    if p.flush(max(1.0, deadline - time.monotonic())):
        raise TimeoutError("fill not delivered in time")
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first: {errors[0]}")
    return acked


def _latest_offsets(bootstrap: str, topic: str, timeout: float = 5) -> dict[int, int] | None:
    """Metadata then ListOffsets (latest) for every partition, or None if the broker cannot answer yet."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    try:
        md = admin.list_topics(topic=topic, timeout=timeout)
        t = md.topics.get(topic)
        if t is None or t.error is not None or len(t.partitions) != RESTART_PARTITIONS:
            return None
        futs = admin.list_offsets({TopicPartition(topic, i): OffsetSpec.latest() for i in t.partitions},
                                  request_timeout=timeout)
        return {tp.partition: f.result(timeout).offset for tp, f in futs.items()}
    except (KafkaException, TimeoutError):
        return None


def _timed_restart(broker: KetchBroker, topic: str, sig: int, acked: dict[int, int]) -> dict[str, Any]:
    broker.stop(sig)
    broker._log.flush()
    log_from = broker.log_path.stat().st_size
    t0 = time.perf_counter()
    broker.start(start_timeout=600)
    listen_s = time.perf_counter() - t0
    got: dict[int, int] | None = None

    def answers() -> bool:
        nonlocal got
        got = _latest_offsets(broker.bootstrap, topic)
        return got is not None

    wait_for(answers, 600, "Metadata and ListOffsets after the restart")
    total = time.perf_counter() - t0
    broker._log.flush()
    return {"signal": signal.Signals(sig).name, "listening_s": round(listen_s, 3), "answering_s": round(total, 3),
            "offsets_match_acked": got == acked, "latest_offsets": got,
            "recovered": recovery_summary(broker.log_path.read_bytes()[log_from:].decode("utf-8", "replace"))}


def recovery_summary(log_text: str) -> dict[str, Any]:
    """What the broker's "partition log recovered" lines say of one start: per partition the
    recovery point it started from and the log end, and the batches it re-validated in all."""
    parts: dict[str, list[int]] = {}
    validated = 0
    for line in log_text.splitlines():
        if '"partition log recovered"' not in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        parts[Path(rec["directory"]).name] = [rec["recovery_point"], rec["log_end_offset"]]
        validated += rec.get("batches_validated", 0)
    return {"batches_validated": validated, "recovery_point_and_log_end": parts}


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def scenario_restart(sizes_gb: list[float], timeout: float) -> dict[str, Any]:
    out: dict[str, Any] = {"partitions": RESTART_PARTITIONS, "message_bytes": RESTART_MESSAGE}
    broker: KetchBroker | None = None
    try:
        broker = KetchBroker(partitions=RESTART_PARTITIONS)
        t0 = time.perf_counter()
        broker.stop(signal.SIGTERM)
        broker.start()
        out["empty_start_listening_s"] = round(time.perf_counter() - t0, 3)
        topic = "scale-restart"
        broker.prepare_topic(topic)
        filled = 0
        acked: dict[int, int] = {}
        for gb in sizes_gb:
            key = f"{gb:g}GB"
            try:
                target = int(gb * 2**30)
                t1 = time.perf_counter()
                more = _fill(broker, topic, target - filled, timeout)
                acked.update(more)
                filled = target
                fill_s = time.perf_counter() - t1
                res: dict[str, Any] = {"log_bytes": _du(broker.dir / "data"), "fill_s": round(fill_s, 1),
                                       "load_average": load_average()}
                res["sigkill"] = _timed_restart(broker, topic, signal.SIGKILL, acked)
                res["sigterm"] = _timed_restart(broker, topic, signal.SIGTERM, acked)
                # the clean close just moved the recovery point to the log end: nothing is above it now
                res["sigkill_no_tail"] = _timed_restart(broker, topic, signal.SIGKILL, acked)
                out[key] = res
                log(f"restart {key}: SIGKILL {res['sigkill']['answering_s']}s, "
                    f"SIGTERM {res['sigterm']['answering_s']}s, SIGKILL without tail "
                    f"{res['sigkill_no_tail']['answering_s']}s")
            except Exception as exc:
                out[key] = {"error": f"{type(exc).__name__}: {exc}\n{broker.log_tail(20)}"}
                log(f"restart {key} FAILED: {exc}")
                break
        return out
    finally:
        if broker is not None:
            broker.close()


# -------------------------------------------------------------------------------------- partitions
TOPIC_PARTITIONS = 100  # partitions per topic; CreateTopics asks for 10 of them (1,000 partitions) at once


def _metrics(node: _Node) -> dict[str, float]:
    with urllib.request.urlopen(f"http://{HOST}:{node.metrics_port}/metrics", timeout=30) as r:
        return parse_metrics(r.read().decode())


def _quorum_leader(cluster: KetchCluster, among: list[_Node]) -> int:
    """The node id that says it leads the metadata quorum, or -1."""
    for node in among:
        try:
            if _metrics(node).get("ketch_quorum_is_leader", 0) == 1:
                return node.node_id
        except OSError:
            continue
    return -1


def _partitions_in_sync(bootstrap: str, topics: set[str], want_isr: int) -> bool:
    try:
        md = AdminClient({"bootstrap.servers": bootstrap, **QUIET}).list_topics(timeout=10)
    except KafkaException:
        return False
    for name in topics:
        t = md.topics.get(name)
        if t is None or t.error is not None or len(t.partitions) != TOPIC_PARTITIONS:
            return False
        for p in t.partitions.values():
            if p.error is not None or p.leader < 0 or len(p.isrs) != want_isr:
                return False
    return True


def _isr_without(bootstrap: str, topics: set[str], node_id: int) -> bool:
    """No partition of `topics` lists `node_id` in its ISR any more."""
    try:
        md = AdminClient({"bootstrap.servers": bootstrap, **QUIET}).list_topics(timeout=10)
    except KafkaException:
        return False
    return all(t in md.topics and all(node_id not in p.isrs for p in md.topics[t].partitions.values())
               for t in topics)


def _metadata_dirs(cluster: KetchCluster) -> dict[str, int]:
    """Bytes on disk of each node's metadata log directory (whatever under its data dir is not a
    user topic's partition directory)."""
    out = {}
    for node in cluster.nodes:
        data = node.dir / "data"
        for d in data.rglob("*"):
            if d.is_dir() and "metadata" in d.name:
                out[f"node{node.node_id}:{d.relative_to(data)}"] = _du(d)
    return out


def _create_batch(cluster: KetchCluster, names: list[str], timeout: float) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    futs = admin.create_topics([NewTopic(n, num_partitions=TOPIC_PARTITIONS, replication_factor=3) for n in names],
                               request_timeout=timeout)
    for f in futs.values():
        f.result(timeout)


def _measure_at(cluster: KetchCluster, topics: set[str]) -> dict[str, Any]:
    res: dict[str, Any] = {"load_average": load_average()}
    alive = [n for n in cluster.nodes if n.alive()]
    m = _metrics(alive[0])
    res["quorum_high_watermark"] = m.get("ketch_quorum_high_watermark")
    res["metadata_dirs_bytes"] = _metadata_dirs(cluster)
    res["broker_fds"] = {str(n.node_id): len(os.listdir(f"/proc/{n.proc.pid}/fd")) for n in alive if n.proc}
    res["broker_rss_kib"] = {}
    for n in alive:
        if n.proc:
            for line in Path(f"/proc/{n.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    res["broker_rss_kib"][str(n.node_id)] = int(line.split()[1])
    # controller failover: SIGKILL the quorum leader, time until another leads and CreateTopics works
    leader_id = _quorum_leader(cluster, cluster.nodes)
    victim = next(n for n in cluster.nodes if n.node_id == leader_id)
    others = [n for n in cluster.nodes if n is not victim]
    bootstrap = ",".join(n.address for n in others)
    probe = f"scale-probe-{uuid.uuid4().hex[:6]}"
    t0 = time.perf_counter()
    cluster.kill_node(victim)
    elected = wait_for(lambda: _quorum_leader(cluster, others) not in (-1, leader_id), 120, "a new quorum leader")

    def create_works() -> bool:
        try:
            a = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
            f = a.create_topics([NewTopic(probe, 1, replication_factor=2)], request_timeout=10)[probe]
            f.result(10)
            return probe in a.list_topics(topic=probe, timeout=10).topics
        except TimeoutError:  # the future's own deadline (concurrent.futures' TimeoutError)
            return False
        except KafkaException as exc:
            return "TOPIC_ALREADY_EXISTS" in str(exc)

    wait_for(create_works, 120, "CreateTopics after the failover")
    res["failover"] = {"killed_node": leader_id, "new_leader_s": round(elected, 3),
                       "create_topics_ok_s": round(time.perf_counter() - t0, 3)}
    # rejoin: once the ISRs have dropped the killed broker (else an ISR of 3 proves nothing), restart
    # it and time until every partition's ISR is 3 again
    t_shrink = time.perf_counter()
    wait_for(lambda: _isr_without(bootstrap, topics, victim.node_id), 300, "the ISRs to drop the killed broker")
    res["isr_shrunk_after_kill_s"] = round(time.perf_counter() - t0, 3)
    res["isr_shrink_wait_s"] = round(time.perf_counter() - t_shrink, 3)
    t1 = time.perf_counter()
    cluster.start_node(victim)
    wait_for(lambda: _partitions_in_sync(cluster.bootstrap, topics, 3), 900, "every ISR back at 3")
    res["rejoin_isr3_s"] = round(time.perf_counter() - t1, 3)
    return res


def scenario_partitions(max_partitions: int, timeout: float, budget_s: float) -> dict[str, Any]:
    """Creates 1,000 partitions at a time until `max_partitions`, or until `budget_s` seconds of
    creating have passed (then the largest count reached is measured instead)."""
    out: dict[str, Any] = {"partitions_per_topic": TOPIC_PARTITIONS, "max_partitions": max_partitions,
                           "budget_s": budget_s, "creates": []}
    started = time.monotonic()
    cluster: KetchCluster | None = None
    try:
        cluster = KetchCluster(partitions=TOPIC_PARTITIONS, metrics=True)
        topics: set[str] = set()
        total = 0
        measure_at = {1000, max_partitions}
        while total < max_partitions:
            names = [f"scale-p{total // TOPIC_PARTITIONS + i}" for i in range(10)]
            t0 = time.perf_counter()
            try:
                _create_batch(cluster, names, timeout)
                topics.update(names)
                created_s = time.perf_counter() - t0
                settled = wait_for(lambda: _partitions_in_sync(cluster.bootstrap, topics, 3), timeout,
                                   "every partition led with ISR 3")
            except Exception as exc:
                out["creates"].append({"at": total, "error": f"{type(exc).__name__}: {exc}"})
                log(f"partitions: creating past {total} FAILED: {exc}")
                break
            total += 10 * TOPIC_PARTITIONS
            fds = {str(n.node_id): len(os.listdir(f"/proc/{n.proc.pid}/fd")) for n in cluster.nodes if n.proc}
            out["creates"].append({"total_partitions": total, "create_topics_s": round(created_s, 3),
                                   "until_isr3_s": round(created_s + settled, 3), "broker_fds": fds,
                                   "load_average": load_average()})
            log(f"partitions: {total} created in {created_s:.1f}s, ISR 3 after {created_s + settled:.1f}s, fds {fds}")
            over_budget = time.monotonic() - started > budget_s and total < max_partitions
            if over_budget:
                out["stopped"] = f"creation budget of {budget_s:.0f}s spent at {total} partitions"
                log(f"partitions: {out['stopped']}")
            if total in measure_at or over_budget:
                try:
                    out[str(total)] = _measure_at(cluster, topics)
                    log(f"partitions {total}: {out[str(total)]}")
                except Exception as exc:
                    out[str(total)] = {"error": f"{type(exc).__name__}: {exc}"}
                    log(f"partitions {total} measurement FAILED: {exc}")
                    break
            if over_budget:
                break
        out["reached"] = total
        return out
    finally:
        if cluster is not None:
            cluster.close()


# -------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "bench" / "results-scale.json")
    ap.add_argument("--only", action="append", choices=SCENARIOS, help="run only this scenario (repeatable)")
    ap.add_argument("--max-partitions", type=int, default=10000,
                    help="partitions RF 3 to create on 3 brokers, in steps of 1,000 (default 10000)")
    ap.add_argument("--partitions-budget", type=float, default=900,
                    help="stop creating partitions after this many seconds and measure there (default 900)")
    ap.add_argument("--messages", type=int, default=1_000_000, help="messages per partition count (produce)")
    ap.add_argument("--restart-gb", default="1,2,4",
                    help="log sizes for the restart scenario, GiB (default 1,2,4)")
    ap.add_argument("--timeout", type=float, default=900, help="deadline per step, seconds")
    args = ap.parse_args(argv)
    chosen = args.only or list(SCENARIOS)
    # An existing file keeps the scenarios not run now: each scenario records its own commit and time.
    result: dict[str, Any] = {"scenarios": {}}
    if args.out.exists():
        try:
            result = {"scenarios": json.loads(args.out.read_text()).get("scenarios", {})}
        except (ValueError, AttributeError):
            pass
    result["machine"] = machine_info()
    runs: dict[str, Callable[[], dict[str, Any]]] = {
        "produce": lambda: scenario_produce([1, 10, 100, 1000], args.messages, args.timeout),
        "connections": lambda: scenario_connections([100, 1000]),
        "restart": lambda: scenario_restart([float(x) for x in args.restart_gb.split(",")], args.timeout),
        "partitions": lambda: scenario_partitions(args.max_partitions, args.timeout, args.partitions_budget),
    }
    for name in SCENARIOS:
        if name not in chosen:
            continue
        log(f"scenario {name}")
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        load_start = load_average()
        try:
            res = runs[name]()
        except Exception as exc:  # recorded; the next scenario still runs
            res = {"error": f"{type(exc).__name__}: {exc}"}
            log(f"{name} FAILED: {exc}")
        res.update(commit=git_commit(), started=started, load_average_start=load_start,
                   load_average_end=load_average())
        result["scenarios"][name] = res
        args.out.write_text(json.dumps(result, indent=2))
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
