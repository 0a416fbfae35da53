"""Issue 14: transaction coordinators that die while their commit markers are half sent, under a
consume-transform-produce copier with random aborts, on three real broker processes.

Every broker runs with KETCH_TEST_CRASH_AT=markers_half_sent: the first time a broker, as a
transaction coordinator, hears that some of a commit's markers are written while others are still
owed, it SIGKILLs itself. The test restarts each such broker without the crash point, so the
coordinators of the copier's transactional id die one after another (the id's partition moves to
a surviving replica each time) until every broker has died once or the input is copied. Then:
output == input exactly once, nothing of an aborted transaction visible, every transaction ended
on every partition (no open transaction, last stable offset == high watermark), and the group's
committed offsets are the input's end offsets.
"""

from __future__ import annotations

import faulthandler
import json
import random
import subprocess
import sys
import time
from collections import Counter

from confluent_kafka import Consumer, TopicPartition
from helpers import REPO_ROOT
from helpers.cluster import Cluster
from helpers.cluster_metadata import SHORT_SESSION, coordinator, listed_everywhere, new_topic, voters_for
from helpers.confluent import QUIET, consume_all, list_offsets
from helpers.soak import TxnPipeline, env_int, find_hanging, parse_out, prefill
from helpers.wait import wait_until

CRASH = "KETCH_TEST_CRASH_AT"
POINT = "markers_half_sent"
SEED = env_int("KETCH_CLUSTER_SEED", random.randrange(1 << 30))
PARTS = 3
MESSAGES = 900
HUNG_S = 90.0  # a copier instance without progress this long (and no broker death) is a client hang
HUNG_TXN_STRIDE = 100_000  # transaction numbers of a replacement instance start here x its index


def _open_transactions(c: Cluster) -> list[dict[str, object]]:
    """Every coordinator's transactional ids still Ongoing or preparing (ListTransactions on each
    broker)."""
    out = subprocess.run([sys.executable, "-m", "broker", "txn", "list", "--json", "--state", "Ongoing",
                          "--state", "PrepareCommit", "--state", "PrepareAbort", "--bootstrap", c.bootstrap.split(",")[0]],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout or "[]")
    assert isinstance(rows, list)
    return rows


def _self_killed(c: Cluster) -> int | None:
    """A broker that still had the crash point and is not running any more: it killed itself."""
    for n in c.node_ids:
        b = c[n]
        if CRASH in b.env and b.proc is not None and not b.is_running():
            return n
    return None


def test_a_copier_is_exactly_once_while_coordinators_die_with_markers_half_sent(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(SEED)
    ctx = f"[seed {SEED}; replay with KETCH_CLUSTER_SEED={SEED}]"
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env={**SHORT_SESSION, "KETCH_REPLICA_LAG_TIME_MAX_MS": "4000",
                                      "KETCH_TRANSACTION_ABORT_TIMED_OUT_INTERVAL_MS": "1000", CRASH: POINT})
    listed_everywhere(c)
    src, dst = "copier-in", "copier-out"
    for t in (src, dst):
        layout = new_topic(c, t, PARTS, 3, {"min.insync.replicas": "2"})
        assert {p[1] for p in layout.partitions} == {1, 2, 3}, layout  # markers cross brokers
    ends = prefill(c.bootstrap, src, MESSAGES, PARTS)
    deadline = time.monotonic() + 400
    workers: list[TxnPipeline] = []

    def spawn() -> TxnPipeline:
        """The copier; a replacement is the same application started again, as a supervisor
        restarting it would (TxnPipeline.successor)."""
        seed = rng.randrange(1 << 30)
        w = (workers[-1].successor(seed=seed, txn_no=HUNG_TXN_STRIDE * len(workers)) if workers else
             TxnPipeline(c.bootstrap, src, dst, ends, seed=seed, deadline=deadline, max_txns=2 * MESSAGES))
        workers.append(w)
        w.start()
        return w

    worker = spawn()
    killed: list[int] = []
    hung: list[str] = []

    def status() -> str:
        return (f"{ctx} killed {killed}; client hangs {len(hung)}; {workers[-1].summary()}; "
                f"worker crash: {workers[-1].crashed}")

    progress: list[tuple[float, tuple[int, ...]]] = []

    def stuck() -> bool:
        """No transaction attempt, rewind or new client for HUNG_S: librdkafka's
        send_offsets_to_transaction can block past its own timeout once the broker it cached as
        group coordinator died (librdkafka #5511, tests/helpers/soak.py). The copier's idle-close
        setting (soak.IDLE_CLOSE) did not end it: a full `make test` run on 2026-11-26 still saw an
        instance stuck in that call for 60 s with the cluster whole. Until the cause is found this
        test replaces such an instance, as a supervisor would, and checks every instance's
        outcome (issue 23 keeps this open)."""
        now = workers[-1].progress
        if not progress or progress[-1][1] != now:
            progress[:] = [(time.monotonic(), now)]
        return time.monotonic() - progress[0][0] > HUNG_S

    try:
        while not worker.done and worker.is_alive():
            wait_until(lambda: _self_killed(c) is not None or workers[-1].done or not workers[-1].is_alive() or stuck(),
                       timeout=240, interval=0.2, message=lambda: f"a coordinator death or the copy's end: {status()}")
            victim = _self_killed(c)
            if victim is None:
                if stuck() and not worker.done:
                    hung.append(worker.summary())
                    assert len(hung) <= 2, f"the copier hung again and again: {hung}; {status()}"
                    print(f"copier instance hung ({worker.summary()}); stacks:")
                    faulthandler.dump_traceback(all_threads=True)
                    worker.stop()
                    worker = spawn()
                    progress.clear()
                continue
            c.kill(victim)  # reaps it: it is already dead
            assert f"{CRASH}={POINT}: killing the broker now" in c[victim].log_text(), c[victim].log_tail()
            del c[victim].env[CRASH]
            c[victim].start(timeout=60)
            killed.append(victim)
            progress.clear()  # the restart's time is not the copier's
        worker.join(60)
    finally:
        for w in workers:
            w.stop()
        worker.join(60)
    print(status())
    assert all(w.crashed is None for w in workers), status()
    assert worker.done, status()
    assert killed, f"no coordinator died with its markers half sent: {status()}"
    assert sum(w.commits for w in workers) > 0 and sum(w.aborts for w in workers) > 0, status()
    committed_txns = {t: n for w in workers for t, n in w.committed_txns.items()}
    aborted_txns = {t: n for w in workers for t, n in w.aborted_txns.items()}

    # ---- output == input, exactly once; nothing of an aborted transaction visible
    committed_out = consume_all(c.bootstrap, dst, PARTS, {"isolation.level": "read_committed"},
                                timeout=120, check_watermarks=False)
    by_input: Counter[bytes] = Counter()
    by_txn: Counter[int] = Counter()
    for r in committed_out:
        assert r.value is not None
        txn, body = parse_out(r.value)
        by_input[body] += 1
        by_txn[txn] += 1
    expected = Counter({b"in-%d" % i: 1 for i in range(MESSAGES)})
    assert by_input == expected, (f"lost {sorted(set(expected) - set(by_input))[:5]}, duplicated "
                                  f"{[v for v, k in by_input.items() if k > 1][:5]}; {status()}")
    assert not {t for t in by_txn if t in aborted_txns}, f"aborted records visible; {status()}"
    short = {t: (by_txn.get(t, 0), n) for t, n in committed_txns.items() if by_txn.get(t, 0) != n}
    assert not short, f"committed transactions not fully visible (seen, written): {short}; {status()}"

    # ---- every transaction ended on every partition
    def settled() -> bool:
        return (_open_transactions(c) == []
                and list_offsets(c.bootstrap, dst, PARTS, "read_committed") == list_offsets(c.bootstrap, dst, PARTS))

    wait_until(settled, timeout=60, message=lambda: f"every transaction to end: {_open_transactions(c)}; {status()}")
    assert find_hanging(c.bootstrap.split(",")[0]) == []

    checker = Consumer({"bootstrap.servers": c.bootstrap, "group.id": worker.group, "enable.auto.commit": False,
                        "isolation.level": "read_committed", **QUIET})
    try:
        got = checker.committed([TopicPartition(src, p) for p in range(PARTS)], timeout=30)
    finally:
        checker.close()
    assert {tp.partition: tp.offset for tp in got} == ends, status()


def test_offsets_in_a_transaction_whose_coordinator_is_another_broker(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """TxnOffsetCommit goes to the group's coordinator, which asks the transaction's coordinator
    (another broker here) whether the offsets partition is in the transaction: over the wire."""
    from confluent_kafka import Producer

    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters])
    listed_everywhere(c)
    new_topic(c, "offsets-src", 1, 3)
    new_topic(c, "offsets-dst", 1, 3)
    tid = "txn-elsewhere"
    wait_until(lambda: coordinator(c.ports[1], tid, 1) > 0, timeout=30, message="a transaction coordinator")
    wait_until(lambda: coordinator(c.ports[1], "probe", 0) > 0, timeout=30, message="a group coordinator")
    txn_node = coordinator(c.ports[1], tid, 1)
    group = next(g for g in (f"group-{i}" for i in range(200)) if coordinator(c.ports[1], g, 0) not in (txn_node, -1))
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid, **QUIET})
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False, **QUIET})
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("offsets-dst", b"copied")
        p.send_offsets_to_transaction([TopicPartition("offsets-src", 0, 17)], consumer.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        got = consumer.committed([TopicPartition("offsets-src", 0)], timeout=30)
    finally:
        consumer.close()
    assert [tp.offset for tp in got] == [17]
