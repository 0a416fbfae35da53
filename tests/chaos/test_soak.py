"""Soaks: exactly-once pipelines and idempotent producers against a broker that keeps crashing and
freezing. Marked ``slow``: excluded from ``make test``, run by ``make soak``.

Bounds: ``KETCH_SOAK_SECONDS`` (default 300) of fault injection, then a bounded drain with the broker
healthy; ``KETCH_SOAK_MESSAGES`` input messages (default 150 per soak second); ``KETCH_SOAK_SEED``
fixes the random choices (fault kinds, freeze lengths, batch sizes, which transactions abort or
crash); the timing of faults still varies. The seed is printed in every failure message.

The transactional soak's client also "crashes" now and then (drops its producer mid-transaction and
a new instance takes over), so fencing and coordinator-side aborts are exercised as well.

The broker listens on 127.0.0.1 only and runs with ``KETCH_FLUSH_MESSAGES=1``: every acknowledged
write is fsynced, so a SIGKILL must lose nothing that a client was told is durable.
"""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict

import pytest
from confluent_kafka import Consumer, TopicPartition
from helpers import BrokerProcess, unique_topic, wait_until
from helpers.confluent import QUIET, consume_all, create_topic, list_offsets
from helpers.soak import (
    FaultInjector,
    IdempotentStream,
    TxnPipeline,
    env_int,
    find_hanging,
    parse_out,
    prefill,
)
from helpers.txn import RawTxn

pytestmark = pytest.mark.slow

PARTITIONS = 3
SOAK_SECONDS = env_int("KETCH_SOAK_SECONDS", 300)
SEED = env_int("KETCH_SOAK_SEED", random.randrange(1 << 30))
RECOVERY_TIMEOUT = 120.0  # after a fault the clients must make progress again within this
ENV = {"KETCH_FLUSH_MESSAGES": "1", "KETCH_TRANSACTION_ABORT_TIMED_OUT_INTERVAL_MS": "1000"}
OFFSETS_PARTITIONS = 50  # offsets_topic_num_partitions


def _open_txn_partitions(raw: RawTxn, topic: str, partitions: int) -> list[tuple[int, int, int]]:
    """(partition, producer id, first offset) of every transaction DescribeProducers says is open."""
    return [
        (p, s.producer_id, s.current_txn_start_offset)
        for p in range(partitions)
        for s in raw.producers(topic, p)
        if s.current_txn_start_offset >= 0
    ]


@pytest.mark.timeout(SOAK_SECONDS * 4 + 900)
def test_transactional_pipeline_is_exactly_once_under_kills_and_freezes(broker_factory) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(SEED)
    ctx = f"[seed {SEED}]"
    b: BrokerProcess = broker_factory(env=ENV)
    bs = b.bootstrap
    assert bs.startswith("127.0.0.1:")
    src, dst = unique_topic("soak-in"), unique_topic("soak-out")
    create_topic(bs, src, PARTITIONS)
    create_topic(bs, dst, PARTITIONS)
    n = env_int("KETCH_SOAK_MESSAGES", 150 * SOAK_SECONDS)
    ends = prefill(bs, src, n, PARTITIONS)
    assert list_offsets(bs, src, PARTITIONS) == {p: (0, ends[p]) for p in range(PARTITIONS)}

    start = time.monotonic()
    fault_deadline = start + SOAK_SECONDS
    drain_budget = SOAK_SECONDS * 2 + 300  # the rest of the input, broker healthy
    worker = TxnPipeline(
        bs, src, dst, ends, seed=rng.randrange(1 << 30), deadline=fault_deadline + drain_budget,
        max_txns=2 * n,
    )
    faults = FaultInjector(b, rng)
    max_faults = SOAK_SECONDS // 2 + 10

    def status() -> str:
        return f"{ctx} {worker.summary()}; faults {faults.log.summary()}; worker crash: {worker.crashed}"

    worker.start()
    try:
        # Fault phase: after each fault, the pipeline must commit a few more transactions (it
        # recovered) before the next one; faults hit it at varying points of its transaction cycle.
        while time.monotonic() < fault_deadline and faults.log.kills + faults.log.stops < max_faults:
            goal = worker.commits + rng.randint(2, 15)
            wait_until(
                lambda goal=goal: worker.commits >= goal or worker.done or not worker.is_alive(),
                timeout=RECOVERY_TIMEOUT,
                message=lambda: f"the pipeline to commit again after a fault: {status()}",
            )
            if worker.done or not worker.is_alive():
                break
            faults.random_fault()
        faults.ensure_up()
        # Drain: the broker stays up; the pipeline must finish the input.
        wait_until(
            lambda: worker.done or not worker.is_alive(),
            timeout=drain_budget + 60,
            interval=0.5,
            message=lambda: f"the pipeline to process all input: {status()}",
        )
        worker.join(60)
    finally:
        worker.stop()
        faults.ensure_up()
        worker.join(60)
    print(status())
    assert worker.crashed is None, status()
    assert worker.done and not worker.is_alive(), status()
    assert faults.log.kills >= 1 and faults.log.stops >= 1, f"too few faults for a soak: {status()}"
    assert worker.commits > 0 and worker.aborts > 0 and worker.crashes > 0, status()

    # ---- every input exactly once at read_committed, nothing from an aborted transaction
    committed_out = consume_all(bs, dst, PARTITIONS, {"isolation.level": "read_committed"},
                                timeout=300, check_watermarks=False)
    by_input: Counter[bytes] = Counter()
    by_txn: Counter[int] = Counter()
    misplaced = []
    for r in committed_out:
        assert r.value is not None
        txn, body = parse_out(r.value)
        by_input[body] += 1
        by_txn[txn] += 1
        if int(body.split(b"-")[1]) % PARTITIONS != r.partition:
            misplaced.append(r)
    expected = {b"in-%d" % i for i in range(n)}
    missing = expected - set(by_input)
    dupes = {v: c for v, c in by_input.items() if c > 1}
    strangers = set(by_input) - expected
    assert not missing and not dupes and not strangers, (
        f"{len(missing)} lost (e.g. {sorted(missing)[:5]}), {len(dupes)} duplicated "
        f"(e.g. {list(dupes.items())[:5]}), {len(strangers)} unknown; {status()}"
    )
    assert not misplaced, f"output in the wrong partition: {misplaced[:5]}"
    visible_aborted = {t: c for t, c in by_txn.items() if t in worker.aborted_txns}
    assert not visible_aborted, f"records of aborted transactions visible: {visible_aborted}; {status()}"
    short = {t: (by_txn.get(t, 0), c) for t, c in worker.committed_txns.items() if by_txn.get(t, 0) != c}
    assert not short, f"committed transactions not fully visible (seen, written): {short}; {status()}"

    # The aborted records are in the log (so the check above had something to hide).
    all_out = consume_all(bs, dst, PARTITIONS, {"isolation.level": "read_uncommitted"},
                          timeout=300, check_watermarks=False)
    aborted_in_log = {parse_out(r.value)[0] for r in all_out if r.value} & set(worker.aborted_txns)
    assert aborted_in_log, f"no aborted transaction's records reached the log; {status()}"

    # ---- nothing left hanging
    raw = RawTxn(b.port)
    try:
        def settled() -> bool:
            open_states = raw.list_txns(states=["Ongoing", "PrepareCommit", "PrepareAbort"])
            return (
                open_states.error_code == 0
                and open_states.transaction_states == []
                and all(raw.latest(dst, p, committed=True) == raw.latest(dst, p, committed=False)
                        for p in range(PARTITIONS))
            )

        wait_until(settled, timeout=60, message=lambda: f"every transaction to end; {status()}")
        assert raw.describe(worker.tid).transaction_state in ("CompleteCommit", "CompleteAbort", "Empty")
        assert _open_txn_partitions(raw, dst, PARTITIONS) == []
        assert _open_txn_partitions(raw, "__consumer_offsets", OFFSETS_PARTITIONS) == []
        assert _open_txn_partitions(raw, src, PARTITIONS) == []
    finally:
        raw.close()
    assert find_hanging(bs) == []

    # ---- the group's committed offsets are exactly the input's end offsets
    checker = Consumer({"bootstrap.servers": bs, "group.id": worker.group, "isolation.level": "read_committed",
                        "enable.auto.commit": False, **QUIET})
    try:
        got = checker.committed([TopicPartition(src, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        checker.close()
    assert {tp.partition: tp.offset for tp in got} == ends, status()
    assert list_offsets(bs, src, PARTITIONS) == {p: (0, ends[p]) for p in range(PARTITIONS)}


@pytest.mark.timeout(SOAK_SECONDS * 2 + 600)
def test_idempotent_producer_loses_and_duplicates_nothing_across_kills(broker_factory) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(SEED + 1)
    ctx = f"[seed {SEED}]"
    b: BrokerProcess = broker_factory(env=ENV)
    bs = b.bootstrap
    topic = unique_topic("soak-idem")
    create_topic(bs, topic, PARTITIONS)
    kills = env_int("KETCH_SOAK_KILLS", max(8, SOAK_SECONDS // 10))
    stream = IdempotentStream(bs, topic, PARTITIONS, max_messages=env_int("KETCH_SOAK_IDEMPOTENT_MAX", 2_000_000))
    faults = FaultInjector(b, rng)
    deadline = time.monotonic() + max(SOAK_SECONDS / 2, 30)

    def status() -> str:
        return (f"{ctx} sent {stream.sent}, acked {len(stream.acked)}, failed {len(stream.failed)} "
                f"({Counter(stream.failed.values())}), fatal {stream.fatal[:3]}; faults {faults.log.summary()}; "
                f"crash: {stream.crashed}")

    stream.start()
    try:
        while faults.log.kills < kills and time.monotonic() < deadline:
            goal = len(stream.acked) + rng.randint(200, 3000)
            wait_until(
                lambda goal=goal: len(stream.acked) >= goal or not stream.is_alive(),
                timeout=RECOVERY_TIMEOUT,
                message=lambda: f"acknowledgements to resume after a restart: {status()}",
            )
            if not stream.is_alive():
                break
            faults.kill_and_restart()
        goal = len(stream.acked) + 1000
        wait_until(lambda: len(stream.acked) >= goal or not stream.is_alive(), timeout=RECOVERY_TIMEOUT,
                   message=lambda: f"acknowledgements after the last restart: {status()}")
    finally:
        stream.stop()
        faults.ensure_up()
        stream.join(180)
    print(status())
    assert stream.crashed is None, status()
    assert not stream.is_alive() and stream.unflushed == 0, status()
    assert faults.log.kills >= min(kills, 3), f"too few restarts for a soak: {status()}"
    assert not stream.fatal, status()

    got = consume_all(bs, topic, PARTITIONS, {"isolation.level": "read_uncommitted"}, timeout=300,
                      check_watermarks=False)
    where: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    for r in got:
        assert r.value is not None
        where[r.value].append((r.partition, r.offset))
    dupes = {v: locs for v, locs in where.items() if len(locs) > 1}
    assert not dupes, f"{len(dupes)} values written more than once, e.g. {list(dupes.items())[:5]}; {status()}"
    lost = {v: pos for v, pos in stream.acked.items() if v not in where}
    assert not lost, f"{len(lost)} acknowledged values missing, e.g. {list(lost.items())[:5]}; {status()}"
    moved = {v: (pos, where[v]) for v, pos in stream.acked.items() if where[v] != [pos]}
    assert not moved, f"{len(moved)} values not at their acknowledged offset, e.g. {list(moved.items())[:5]}"
    strangers = set(where) - set(stream.acked) - set(stream.failed)
    assert not strangers, f"values never produced: {sorted(strangers)[:5]}"
    # Dense logs: every offset up to the end holds one record (no holes from lost writes).
    ends = list_offsets(bs, topic, PARTITIONS)
    per_part = Counter(r.partition for r in got)
    assert {p: ends[p][1] for p in range(PARTITIONS)} == {p: per_part[p] for p in range(PARTITIONS)}, status()
