"""Wire codec micro-benchmark: encode and decode ops/s of a few hot messages, optionally side by
side with the protocol package of another git revision.

    python -m bench.codec --out bench/codec.json [--reference REV] [--seconds 0.2] [--repeat 5]

Each side runs in its own interpreter (this file run as a script with `-P`, so `protocol` is
imported from the PYTHONPATH given: this checkout, or a temporary `git worktree` of REV), the two alternating
`--repeat` times; the best of each is kept, because on a shared machine noise only ever slows a
run down. The messages are built with the same constructors on both sides, so the reference must
be a revision whose protocol/messages declares them (any since the schema engine). See
docs/bench.md ("Wire codec").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO_ROOT = HERE.parent.parent


def _cases() -> dict[str, tuple[Any, int]]:
    """name -> (message, version): what the broker and its followers and clients exchange most,
    with only fields their version carries (so each decodes back equal)."""
    import protocol.messages.registry  # noqa: F401 - requests decode as the broker does (refuse_nulls)
    from protocol.messages import add_partitions_to_txn as apt
    from protocol.messages import end_txn, fetch, metadata, produce

    tid = uuid.UUID(int=0x1234_5678_9ABC_DEF0_0FED_CBA9_8765_4321)
    batch = bytes(range(256)) * 4  # a 1 KiB record batch: the codec never looks inside
    fetch_resp = fetch.FetchResponse(
        throttle_time_ms=0, error_code=0, session_id=7,
        responses=[fetch.FetchableTopicResponse(topic_id=tid, partitions=[
            fetch.PartitionData(partition_index=i, error_code=0, high_watermark=1000 + i,
                                last_stable_offset=1000 + i, log_start_offset=0,
                                aborted_transactions=[], records=batch)
            for i in range(20)])])
    follower_fetch = fetch.FetchRequest(
        replica_state=fetch.ReplicaState(replica_id=2, replica_epoch=11),
        max_wait_ms=500, min_bytes=1, max_bytes=10 << 20, session_id=0, session_epoch=-1,
        topics=[fetch.FetchTopic(topic_id=tid, partitions=[
            fetch.FetchPartition(partition=i, current_leader_epoch=3, fetch_offset=1000 + i,
                                 last_fetched_epoch=3, log_start_offset=0, partition_max_bytes=1 << 20)
            for i in range(20)])])
    produce_req = produce.ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=30000,
        topic_data=[produce.TopicProduceData(name="orders", partition_data=[
            produce.PartitionProduceData(index=i, records=batch) for i in range(4)])])
    brokers = [metadata.MetadataResponseBroker(node_id=i, host=f"broker-{i}.local", port=9092, rack=None)
               for i in range(3)]
    metadata_resp = metadata.MetadataResponse(
        throttle_time_ms=0, brokers=brokers, cluster_id="ketch-cluster", controller_id=0,
        topics=[metadata.MetadataResponseTopic(error_code=0, name="orders", topic_id=tid, is_internal=False,
                                               partitions=[metadata.MetadataResponsePartition(
                                                   error_code=0, partition_index=i, leader_id=i % 3,
                                                   leader_epoch=4, replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2],
                                                   offline_replicas=[])
                                                   for i in range(50)])])
    topics = [apt.AddPartitionsToTxnTopic(name="orders", partitions=[0, 1, 2, 3])]
    apt_v3 = apt.AddPartitionsToTxnRequest(v3_and_below_transactional_id="txn-1", v3_and_below_producer_id=4242,
                                           v3_and_below_producer_epoch=0, v3_and_below_topics=topics)
    apt_v5 = apt.AddPartitionsToTxnRequest(transactions=[apt.AddPartitionsToTxnTransaction(
        transactional_id="txn-1", producer_id=4242, producer_epoch=0, verify_only=True, topics=topics)])
    end = end_txn.EndTxnRequest(transactional_id="txn-1", producer_id=4242, producer_epoch=0, committed=True)
    return {
        "fetch_response_20p_v16": (fetch_resp, 16),
        "fetch_request_follower_20p_v17": (follower_fetch, 17),
        "produce_request_4p_v9": (produce_req, 9),
        "metadata_response_50p_v12": (metadata_resp, 12),
        "add_partitions_to_txn_request_v3": (apt_v3, 3),
        "add_partitions_to_txn_request_v5": (apt_v5, 5),
        "end_txn_request_v4": (end, 4),
    }


def _rate(fn: Callable[[], Any], seconds: float) -> float:
    """Calls per second of `fn`, timed over batches until `seconds` have passed."""
    batch = 1
    while True:  # a batch long enough for the clock to be exact
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        dt = time.perf_counter() - t0
        if dt > 0.01:
            break
        batch *= 4
    done, spent = 0, 0.0
    while spent < seconds:
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        spent += time.perf_counter() - t0
        done += batch
    return done / spent


def measure(seconds: float) -> dict[str, dict[str, float]]:
    """ops/s of encode, decode and both, per case, with whatever `protocol` is importable."""
    out: dict[str, dict[str, float]] = {}
    for name, (msg, version) in _cases().items():
        cls = type(msg)
        data = msg.encode(version)
        if cls.decode(data, version).encode(version) != data:
            raise SystemExit(f"{name}: decode/encode does not round trip")

        def enc(msg: Any = msg, version: int = version) -> bytes:
            return msg.encode(version)  # type: ignore[no-any-return]

        def dec(cls: Any = cls, data: bytes = data, version: int = version) -> Any:
            return cls.decode(data, version)

        def both(cls: Any = cls, msg: Any = msg, version: int = version) -> Any:
            return cls.decode(msg.encode(version), version)

        out[name] = {"bytes": len(data), "encode_ops_s": _rate(enc, seconds),
                     "decode_ops_s": _rate(dec, seconds), "roundtrip_ops_s": _rate(both, seconds)}
    return out


def _run_side(pythonpath: Path, seconds: float) -> dict[str, dict[str, float]]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    proc = subprocess.run([sys.executable, "-P", str(HERE), "--worker", "--seconds", str(seconds)], cwd=pythonpath,
                          env=env, check=True, capture_output=True, text=True)
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def _best(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    best: dict[str, dict[str, float]] = {}
    for run in runs:
        for case, figures in run.items():
            b = best.setdefault(case, dict(figures))
            for k, v in figures.items():
                b[k] = max(b[k], v)
    return {c: {k: (round(v) if k != "bytes" else int(v)) for k, v in f.items()} for c, f in best.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--reference", help="a git revision whose protocol package to measure side by side")
    ap.add_argument("--seconds", type=float, default=0.2, help="timing per figure per run")
    ap.add_argument("--repeat", type=int, default=5, help="runs per side (the best is kept)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        json.dump(measure(args.seconds), sys.stdout)
        return

    from .throughput import git_commit, reference_checkout

    result: dict[str, Any] = {"python": sys.version.split()[0], "commit": git_commit(),
                              "seconds": args.seconds, "repeat": args.repeat}
    if args.reference is None:
        result["this"] = _best([_run_side(REPO_ROOT, args.seconds) for _ in range(args.repeat)])
    else:
        with reference_checkout(args.reference) as ref:
            ours: list[dict[str, dict[str, float]]] = []
            theirs: list[dict[str, dict[str, float]]] = []
            for _ in range(args.repeat):  # alternate, so load changes hit both sides alike
                theirs.append(_run_side(ref, args.seconds))
                ours.append(_run_side(REPO_ROOT, args.seconds))
        result["this"], result["reference"] = _best(ours), _best(theirs)
        result["reference_commit"] = git_commit(rev=args.reference)
        result["ratios"] = {
            case: {k: round(v / result["reference"][case][k], 2) for k, v in figures.items() if k != "bytes"}
            for case, figures in result["this"].items()}
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
