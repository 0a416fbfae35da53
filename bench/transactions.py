"""Transactional throughput: Ketch against librdkafka's mock cluster, with the idempotent
non-transactional producer as the baseline of the same run.

    python -m bench.transactions --out bench/results-transactions.json [--sizes 1,100,10000] [--messages N]
                                 [--reference REV] [--targets mock,ketch,ketch-3]

For each target (the mock first, then a Ketch broker subprocess, and with --targets ...,ketch-3 three
Ketch brokers in one cluster: topics RF 3 and min.insync.replicas 2, `__transaction_state` RF 3),
in one run:
  idempotent   N messages, enable.idempotence=true, no transactions (the baseline)
  txn-<k>      transactions of k messages each: begin, k x produce, commit; repeated until about
               N messages (at least 20 transactions, at most --max-txns)
Same client (confluent-kafka), 100-byte messages, acks=all, linger.ms=5. The mock is a speed
reference only: it does not write real markers nor keep the LSO (docs/protocol-versions notes), so
its transaction cost is close to zero by construction. Compare ratios within one run only.

With --reference REV the broker of that git revision (a temporary worktree) runs the same
scenarios in the same run, as target "reference": how a change moved the figures, side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import uuid
from array import array
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from .targets import QUIET, REPO_ROOT, Target, cpu_seconds, log
from .throughput import (
    DEFAULT_TARGETS,
    LINGER_MS,
    MESSAGE_BYTES,
    TARGETS,
    _percentiles,
    git_commit,
    machine_info,
    make_target,
    parse_targets,
    reference_checkout,
)


def _produce_n(p: Producer, topic: str, n: int, pad: bytes) -> None:
    for i in range(n):
        while True:
            try:
                p.produce(topic, b"%010d" % i + pad)
                break
            except BufferError:
                p.poll(0.005)
        if i % 1000 == 999:
            p.poll(0)


def run_idempotent(target: Target, messages: int, timeout: float) -> dict[str, Any]:
    """The baseline, with exactly the produce loop the transactions use (no per-message callback):
    from the first produce() to flush() returning."""
    topic = f"bench-idem-{uuid.uuid4().hex[:8]}"
    target.prepare_topic(topic)
    p = Producer(
        {
            "bootstrap.servers": target.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": LINGER_MS,
            **QUIET,
        }
    )
    p.produce(topic, b"w" * MESSAGE_BYTES)
    if p.flush(30) != 0:
        raise RuntimeError("warm-up message not delivered")
    start = time.perf_counter()
    _produce_n(p, topic, messages, b"x" * (MESSAGE_BYTES - 10))
    if p.flush(timeout) != 0:
        raise TimeoutError(f"messages undelivered after {timeout}s")
    elapsed = time.perf_counter() - start
    return {
        "messages": messages,
        "elapsed_s": round(elapsed, 4),
        "msgs_per_s": round(messages / elapsed, 1),
        "partitions": target.partitions,
    }


def run_transactions(
    target: Target, per_txn: int, messages: int, max_txns: int, timeout: float
) -> dict[str, Any]:
    """Transactions of `per_txn` messages; the clock runs from the first begin to the last commit."""
    topic = f"bench-txn-{per_txn}-{uuid.uuid4().hex[:8]}"
    target.prepare_topic(topic)
    txns = max(20, min(max_txns, messages // per_txn))
    p = Producer(
        {
            "bootstrap.servers": target.bootstrap,
            "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
            "acks": "all",
            "linger.ms": LINGER_MS,
            **QUIET,
        }
    )
    p.init_transactions(60)
    p.begin_transaction()  # warm-up: coordinator, metadata, connections
    p.produce(topic, b"w" * MESSAGE_BYTES)
    p.commit_transaction(60)
    pad = b"x" * (MESSAGE_BYTES - 10)
    commit_ms = array("d")
    now = time.perf_counter
    deadline = time.monotonic() + timeout
    pids = target.broker_pids()
    cpu_before = [cpu_seconds(pid) for pid in pids]
    own_before = time.process_time()
    start = now()
    for t in range(txns):
        p.begin_transaction()
        _produce_n(p, topic, per_txn, pad)
        c0 = now()
        p.commit_transaction(max(1.0, deadline - time.monotonic()))
        commit_ms.append((now() - c0) * 1000.0)
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {t + 1} of {txns} transactions within {timeout}s")
    elapsed = now() - start
    own_cpu = time.process_time() - own_before
    broker_cpu = [cpu_seconds(pid) - b for pid, b in zip(pids, cpu_before, strict=True)]
    n = txns * per_txn
    return {
        # CPU per transaction: each broker process's, and this process's (the client, and the
        # mock when it is the target): where a transaction's time goes, beside its wall time
        "wall_ms_per_txn": round(elapsed / txns * 1000, 3),
        "broker_cpu_ms_per_txn": [round(c / txns * 1000, 3) for c in broker_cpu],
        "client_cpu_ms_per_txn": round(own_cpu / txns * 1000, 3),
        "messages_per_txn": per_txn,
        "transactions": txns,
        "messages": n,
        "elapsed_s": round(elapsed, 4),
        "txns_per_s": round(txns / elapsed, 1),
        "msgs_per_s": round(n / elapsed, 1),
        "commit_ms": _percentiles(commit_ms),
        "partitions": target.partitions,
    }


def run_target(
    name: str,
    partitions: int,
    sizes: list[int],
    messages: int,
    max_txns: int,
    timeout: float,
    ketch_env: dict[str, str],
    repo: Path = REPO_ROOT,
) -> dict[str, Any]:
    """`name` "reference" is a single broker of another checkout (`repo`)."""
    target = make_target("ketch" if name == "reference" else name, partitions, ketch_env, repo)
    out: dict[str, Any] = {}
    try:
        log(f"{name}: idempotent baseline, {messages} messages")
        base = run_idempotent(target, messages, timeout)
        base.update(target.replication_report())
        out["idempotent"] = base
        out["partitions"] = base["partitions"]
        for k in sizes:
            log(f"{name}: transactions of {k}")
            try:
                res = run_transactions(target, k, messages, max_txns, timeout)
                res.update(target.replication_report())
            except Exception as exc:  # record and go on with the next size
                detail = f"{type(exc).__name__}: {exc}"
                if target.log_tail():
                    detail += "\n" + target.log_tail()
                res = {"error": detail}
            out[f"txn-{k}"] = res
            if "msgs_per_s" in res:
                res["msgs_ratio_to_idempotent"] = round(res["msgs_per_s"] / base["msgs_per_s"], 4)
                log(
                    f"{name} txn-{k}: {res['txns_per_s']:.0f} txn/s, {res['msgs_per_s']:.0f} msg/s "
                    f"({res['msgs_ratio_to_idempotent']:.2f} of idempotent); per txn {res['wall_ms_per_txn']} ms, "
                    f"CPU ms brokers {res['broker_cpu_ms_per_txn']} client {res['client_cpu_ms_per_txn']}"
                )
    finally:
        target.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="bench.transactions", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", default="bench/results-transactions.json")  # git-ignored
    ap.add_argument("--messages", type=int, default=100_000, help="messages per scenario (approximately)")
    ap.add_argument("--sizes", default="1,100,10000", help="messages per transaction, comma separated")
    ap.add_argument("--max-txns", type=int, default=2000, help="cap on transactions per scenario")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--ketch-env", action="append", default=[], help="KEY=VALUE for the Ketch broker")
    ap.add_argument("--reference", default=None, help="git revision whose broker also runs, side by side")
    ap.add_argument(
        "--targets",
        type=parse_targets,
        default=parse_targets(DEFAULT_TARGETS),
        metavar="T1,T2",
        help=f"a subset of {','.join(TARGETS)} (default {DEFAULT_TARGETS}); ketch-3 is three brokers, RF 3",
    )
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    env = dict(kv.split("=", 1) for kv in args.ketch_env)
    results: dict[str, Any] = {
        "machine": machine_info(),
        "settings": {
            "message_bytes": MESSAGE_BYTES,
            "linger_ms": LINGER_MS,
            "acks": "all",
            "messages": args.messages,
            "sizes": sizes,
            "ketch_env": env,
            "ketch_commit": git_commit(),
            "reference": args.reference,
            "targets": args.targets,
        },
    }
    failed = False
    partitions = 4
    with contextlib.ExitStack() as stack:
        targets: list[tuple[str, Path]] = [(name, REPO_ROOT) for name in args.targets]
        if args.reference:
            targets.append(("reference", stack.enter_context(reference_checkout(args.reference))))
        for name, repo in targets:
            try:
                results[name] = run_target(
                    name, partitions, sizes, args.messages, args.max_txns, args.timeout, env, repo
                )
                partitions = results[name].get("partitions", partitions)
            except Exception as exc:
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
                log(f"{name} FAILED: {exc}")
            failed |= "error" in results[name] or any(
                "error" in v for v in results[name].values() if isinstance(v, dict)
            )
    for key, x, y in (("ratio_ketch_over_mock", "ketch", "mock"),
                      ("ratio_ketch3_over_ketch", "ketch-3", "ketch"),
                      ("ratio_ketch3_over_mock", "ketch-3", "mock")):  # fmt: skip
        ratios = {}
        for k in ["idempotent", *(f"txn-{s}" for s in sizes)]:
            a, b = results.get(x, {}).get(k, {}), results.get(y, {}).get(k, {})
            if "msgs_per_s" in a and "msgs_per_s" in b:
                ratios[k] = round(a["msgs_per_s"] / b["msgs_per_s"], 4)
        if x in results and y in results:
            results[key] = ratios
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    for name in ("ketch", "ketch-3", "reference", "mock"):
        if name not in results:
            continue
        r = results[name]
        cells = [f"idempotent {r.get('idempotent', {}).get('msgs_per_s', '-')} msg/s"]
        for s in sizes:
            t = r.get(f"txn-{s}", {})
            cells.append(f"txn-{s}: {t.get('txns_per_s', '-')} txn/s {t.get('msgs_per_s', '-')} msg/s")
        print(f"{name:9} " + " | ".join(cells))
    print(f"wrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
