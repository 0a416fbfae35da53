"""Prepared transactions (KIP-939, two-phase commit) on one real broker process: a transaction of
a 2PC id outlives its timeout and a SIGKILL of its coordinator, a new instance that initialises
with KeepPreparedTxn learns its producer id and epoch and commits or aborts it, a stale instance
is fenced, and 2PC is refused where the broker does not allow it."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

from helpers import BrokerProcess, free_port, wait_until
from helpers.consume import read_records
from helpers.two_phase import complete_elsewhere, kill, start_preparer, values
from helpers.txn import RawTxn, txn_batch

from client import Producer, ProducerTxnState
from protocol.errors import ErrorCode as E
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

ALLOW_2PC = {"KETCH_TRANSACTION_TWO_PHASE_COMMIT_ENABLE": "true",
             "KETCH_TRANSACTION_ABORT_TIMED_OUT_INTERVAL_MS": "100"}


def test_2pc_is_refused_where_the_broker_does_not_allow_it(broker: BrokerProcess) -> None:
    c = RawTxn(broker.port)
    try:
        versions = c.request(ApiVersionsRequest(), 3)
        assert isinstance(versions, ApiVersionsResponse)
        assert [(k.min_version, k.max_version) for k in versions.api_keys if k.api_key == 22] == [(0, 6)]
        r = c.init_pid("denied", 10_000, enable_2pc=True)
        assert (r.error_code, r.producer_id) == (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)
        assert c.describe("denied").error_code == E.TRANSACTIONAL_ID_NOT_FOUND  # nothing was written
        assert c.init_ok("denied") == (c.describe("denied").producer_id, 0)  # without 2PC, as ever
    finally:
        c.close()


def _prepare(c: RawTxn, tid: str, topic: str, *, timeout_ms: int, enable_2pc: bool) -> tuple[int, int]:
    """Write three records to each partition of `topic` (2) in a transaction and leave it open."""
    pid, epoch = c.init_ok(tid, timeout_ms, enable_2pc=enable_2pc)
    assert c.add_partitions(tid, pid, epoch, {topic: [0, 1]}) == {(topic, 0): 0, (topic, 1): 0}
    for p in (0, 1):
        assert c.produce(topic, p, txn_batch(pid, epoch, 0, 3), tid)[0] == 0
    return pid, epoch


def test_a_prepared_transaction_outlives_its_timeout_and_a_sigkill_then_a_new_instance_commits_it(
        broker_factory) -> None:  # type: ignore[no-untyped-def]
    b: BrokerProcess = broker_factory(env=ALLOW_2PC)
    c = RawTxn(b.port)
    try:
        c.create_topic("prepared", 2)
        c.create_topic("plain", 2)
        pid, epoch = _prepare(c, "2pc", "prepared", timeout_ms=1_000, enable_2pc=True)
        _prepare(c, "control", "plain", timeout_ms=1_000, enable_2pc=False)
        # The control transaction, begun alongside with the same timeout, is aborted by the reaper;
        # the prepared one is not.
        wait_until(lambda: c.describe("control").transaction_state == "CompleteAbort", timeout=15,
                   message="the control transaction to time out")
        assert c.describe("2pc").transaction_state == "Ongoing"
        assert c.latest("prepared", 0, committed=True) == 0 < c.latest("prepared", 0, committed=False)

        b.restart(kill=True)  # the coordinator dies: the prepared transaction is in its log
        c.close()
        c = RawTxn(b.port)
        d = c.describe("2pc")
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", pid, epoch)
        assert d.transaction_timeout_ms == 2**31 - 1  # the 2PC mark, as Kafka keeps it
        assert c.latest("prepared", 1, committed=True) == 0  # still holding the LSO

        # A new instance keeps the transaction: it learns its id and epoch, gets its own epoch.
        k = c.init_until_done("2pc", 10_000, keep_prepared=True)
        assert (k.error_code, k.ongoing_txn_producer_id, k.ongoing_txn_producer_epoch) == (0, pid, epoch)
        assert (k.producer_id, k.producer_epoch) == (pid, epoch + 1)
        assert c.describe("2pc").transaction_state == "Ongoing"
        # The instance that wrote it is fenced: it cannot end it, nor write more to a new partition.
        assert c.end("2pc", pid, epoch, True, version=5).error_code == E.PRODUCER_FENCED
        assert c.add_partitions("2pc", pid, epoch, {"plain": [0]}) == {("plain", 0): E.PRODUCER_FENCED}
        # The new instance commits it; read_committed sees every record of it.
        done = c.end("2pc", k.producer_id, k.producer_epoch, True, version=5)
        assert (done.error_code, done.producer_id, done.producer_epoch) == (0, pid, epoch + 2)
        for p in (0, 1):
            wait_until(lambda p=p: c.latest("prepared", p, committed=True) == 4, timeout=15,  # type: ignore[misc]
                       message="the commit marker to release the LSO")
        wait_until(lambda: c.describe("2pc").transaction_state == "CompleteCommit", timeout=15,
                   message="the coordinator to complete the commit")
        # A stale instance cannot end the completed transaction either, nor write under its epoch.
        assert c.end("2pc", pid, epoch, False, version=5).error_code == E.PRODUCER_FENCED
        assert c.end("2pc", pid, epoch, True, version=3).error_code == E.PRODUCER_FENCED
        assert c.produce("prepared", 0, txn_batch(pid, epoch, 3, 1), "2pc")[0] == E.INVALID_PRODUCER_EPOCH
    finally:
        c.close()


def test_a_new_instance_aborts_a_prepared_transaction(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b: BrokerProcess = broker_factory(env=ALLOW_2PC)
    c = RawTxn(b.port)
    try:
        c.create_topic("undone", 2)
        pid, epoch = _prepare(c, "2pc-abort", "undone", timeout_ms=1_000, enable_2pc=True)
        k = c.init_until_done("2pc-abort", 10_000, keep_prepared=True)
        assert (k.ongoing_txn_producer_id, k.ongoing_txn_producer_epoch) == (pid, epoch)
        assert c.end("2pc-abort", k.producer_id, k.producer_epoch, False, version=5).error_code == 0
        for p in (0, 1):  # the LSO moves past the aborted records and the marker
            wait_until(lambda p=p: c.latest("undone", p, committed=True) == 4, timeout=15,  # type: ignore[misc]
                       message="the abort marker to release the LSO")
        wait_until(lambda: c.describe("2pc-abort").transaction_state == "CompleteAbort", timeout=15,
                   message="the coordinator to complete the abort")
        assert c.end("2pc-abort", pid, epoch, True, version=5).error_code == E.PRODUCER_FENCED
    finally:
        c.close()


# ---- with the bundled client, in processes of their own -----------------------------------------

async def _read(bootstrap: str, topic: str) -> list[bytes]:
    return sorted(r.value or b"" for r in await read_records(bootstrap, topic, 2, "read_committed"))


async def test_prepared_in_a_process_killed_then_committed_from_another_after_its_timeout(
        broker_factory) -> None:  # type: ignore[no-untyped-def]
    b: BrokerProcess = broker_factory(env=ALLOW_2PC)
    c = RawTxn(b.port)
    try:
        c.create_topic("two-phase", 2)
        c.create_topic("control", 2)
        proc, token = start_preparer(b.bootstrap, "app-0", "two-phase", 20, timeout_ms=1_000)
        kill(proc)  # prepared, then gone
        assert token.transactional_id == "app-0" and (token.producer_id, token.epoch) == (
            c.describe("app-0").producer_id, c.describe("app-0").producer_epoch)
        # A plain transaction with the same timeout, begun now, times out; the prepared one does not.
        _prepare(c, "control", "control", timeout_ms=1_000, enable_2pc=False)
        wait_until(lambda: c.describe("control").transaction_state == "CompleteAbort", timeout=15,
                   message="the control transaction to time out")
        assert c.describe("app-0").transaction_state == "Ongoing"
        assert await _read(b.bootstrap, "two-phase") == []  # prepared: nothing visible yet
        assert complete_elsewhere(b.bootstrap, token, commit=True)
        wait_until(lambda: all(c.latest("two-phase", p, committed=True) == c.latest("two-phase", p, committed=False)
                               for p in (0, 1)), timeout=15, message="the commit markers")
        assert await _read(b.bootstrap, "two-phase") == sorted(values("app-0", 20))
        # The token is spent: completing it again finds nothing open, and changes nothing.
        assert not complete_elsewhere(b.bootstrap, token, commit=False)
        assert await _read(b.bootstrap, "two-phase") == sorted(values("app-0", 20))
    finally:
        c.close()


async def test_prepared_in_a_process_killed_then_aborted_from_another(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b: BrokerProcess = broker_factory(env=ALLOW_2PC)
    c = RawTxn(b.port)
    try:
        c.create_topic("two-phase", 2)
        proc, token = start_preparer(b.bootstrap, "app-1", "two-phase", 10)
        kill(proc)
        assert complete_elsewhere(b.bootstrap, token, commit=False)
        wait_until(lambda: all(c.latest("two-phase", p, committed=True) == c.latest("two-phase", p, committed=False)
                               for p in (0, 1)), timeout=15, message="the abort markers")
        assert await _read(b.bootstrap, "two-phase") == []
        assert c.describe("app-1").transaction_state in ("PrepareAbort", "CompleteAbort")
        # The producer that prepared a transaction may complete it itself, from its token.
        async with Producer(b.bootstrap, transactional_id="app-2", enable_2pc=True) as p:
            await p.init_transactions()
            await p.begin_transaction()
            await p.send("two-phase", b"mine", partition=0)
            token = await p.prepare_transaction()
            assert await p.complete_transaction(token, commit=True)
            assert p.transaction_state is ProducerTxnState.READY
        wait_until(lambda: c.latest("two-phase", 0, committed=True) == c.latest("two-phase", 0, committed=False),
                   timeout=15, message="the commit marker")
        assert await _read(b.bootstrap, "two-phase") == [b"mine"]
    finally:
        c.close()


# ---- the operator's tools: ketch txn list --state prepared / complete, and the metrics ----------

def _ketch(b: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker", "txn", *args, "--bootstrap", b.bootstrap, "--json"],
                          capture_output=True, text=True, timeout=60)


def _rows(b: BrokerProcess, *args: str) -> list[dict]:  # type: ignore[type-arg]
    r = _ketch(b, *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def _prepared_metrics(port: int) -> tuple[float, float]:
    """(ketch_prepared_transactions, ketch_prepared_transaction_max_age_seconds) as scraped."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        lines = r.read().decode().splitlines()
    value = {ln.split(" ")[0]: float(ln.split(" ")[1]) for ln in lines if ln and not ln.startswith("#")}
    return value["ketch_prepared_transactions"], value["ketch_prepared_transaction_max_age_seconds"]


async def test_an_operator_lists_prepared_transactions_and_completes_them(broker_factory) -> None:  # type: ignore[no-untyped-def]
    metrics = free_port()
    b: BrokerProcess = broker_factory(env={**ALLOW_2PC, "KETCH_METRICS_LISTEN": f"127.0.0.1:{metrics}"})
    c = RawTxn(b.port)
    try:
        c.create_topic("ops", 2)
        assert _prepared_metrics(metrics) == (0, 0)
        tokens = {}
        for tid in ("op-1", "op-2"):
            proc, tokens[tid] = start_preparer(b.bootstrap, tid, "ops", 4)
            kill(proc)
        plain_pid, plain_epoch = c.init_ok("plain", 600_000)  # an ordinary transaction, open too
        c.add_partitions("plain", plain_pid, plain_epoch, {"ops": [0]})
        c.init_ok("idle-2pc", enable_2pc=True)  # a 2PC id with nothing open

        rows = _rows(b, "list", "--state", "prepared")
        assert [(r["transactional_id"], r["producer_id"], r["producer_epoch"]) for r in rows] == [
            (t, tokens[t].producer_id, tokens[t].epoch) for t in ("op-1", "op-2")]
        assert all(r["duration_ms"] >= 0 for r in rows)
        [d] = _rows(b, "describe", "op-1")
        assert d["two_pc"] and d["state"] == "Ongoing"
        count, age = _prepared_metrics(metrics)
        assert count == 2 and age > 0

        [done] = _rows(b, "complete", "op-1", "--commit")
        assert (done["producer_id"], done["producer_epoch"], done["result"]) == (
            tokens["op-1"].producer_id, tokens["op-1"].epoch, "committed")
        [done] = _rows(b, "complete", "op-2", "--abort")
        assert done["result"] == "aborted"
        [again] = _rows(b, "complete", "op-1", "--commit")
        assert again["result"] == "nothing open"
        refused = _ketch(b, "complete", "plain", "--abort")
        assert refused.returncode == 1 and "two-phase" in refused.stderr
        assert c.describe("plain").transaction_state == "Ongoing"  # left to its timeout

        wait_until(lambda: _rows(b, "list", "--state", "prepared") == [], timeout=15,
                   message="no prepared transaction listed")
        wait_until(lambda: _prepared_metrics(metrics) == (0, 0), timeout=15, message="the metrics to follow")
        got = await _read(b.bootstrap, "ops")
        assert got == sorted(values("op-1", 4))
    finally:
        c.close()
