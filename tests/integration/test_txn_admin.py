"""`ketch txn list|describe|find-hanging|abort` and the admin APIs behind them, on a real broker.

A hanging transaction is made the way one happens in life: the partition holds a transaction's
data but no coordinator knows the transaction (here: its `__transaction_state` is wiped while the
broker is down). Only an operator's abort marker can release the partition's LSO then.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from helpers import BrokerProcess, wait_until
from helpers.txn import RawTxn, txn_batch


def ketch(broker: BrokerProcess, *args: str, bootstrap: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker", "txn", *args, "--bootstrap", bootstrap or broker.bootstrap],
                          capture_output=True, text=True, timeout=60)


def ketch_json(broker: BrokerProcess, *args: str, bootstrap: str | None = None) -> list[dict]:  # type: ignore[type-arg]
    r = ketch(broker, *args, "--json", bootstrap=bootstrap)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def test_list_and_describe(broker: BrokerProcess) -> None:
    c = RawTxn(broker.port)
    try:
        c.create_topic("t", 2)
        pid, epoch = c.init_ok("app-1")
        c.add_partitions("app-1", pid, epoch, {"t": [0, 1]})
        c.produce("t", 1, txn_batch(pid, epoch, 0, 2), "app-1")
        pid2, _ = c.init_ok("app-2")
        rows = ketch_json(broker, "list")
        assert {(r["transactional_id"], r["producer_id"], r["state"]) for r in rows} == {
            ("app-1", pid, "Ongoing"), ("app-2", pid2, "Empty")}
        assert [r["transactional_id"] for r in ketch_json(broker, "list", "--state", "Ongoing")] == ["app-1"]
        assert [r["transactional_id"] for r in ketch_json(broker, "list", "--producer-id", str(pid2))] == ["app-2"]
        assert ketch_json(broker, "list", "--duration-ms", "3600000") == []
        bad = ketch(broker, "list", "--state", "Sleeping")
        assert bad.returncode == 1 and "Sleeping" in bad.stderr
        [d] = ketch_json(broker, "describe", "app-1")
        assert (d["state"], d["producer_id"], d["producer_epoch"]) == ("Ongoing", pid, epoch)
        assert sorted(d["partitions"]) == ["t-0", "t-1"] and d["duration_ms"] >= 0
        missing = ketch(broker, "describe", "nobody")
        assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr
        [p] = c.producers("t", 1)
        assert (p.producer_id, p.producer_epoch, p.current_txn_start_offset, p.last_sequence) == (pid, epoch, 0, 1)
        # A live transaction, however old, is not hanging: its coordinator knows it.
        assert ketch_json(broker, "find-hanging", "--max-transaction-timeout-ms", "0") == []
    finally:
        c.close()


def test_find_and_abort_a_hanging_transaction(broker: BrokerProcess) -> None:
    c = RawTxn(broker.port)
    try:
        c.create_topic("h", 1)
        pid, epoch = c.init_ok("lost")
        c.add_partitions("lost", pid, epoch, {"h": [0]})
        assert c.produce("h", 0, txn_batch(pid, epoch, 0, 3), "lost") == (0, 0)
        c.produce("h", 0, txn_batch(-1, -1, -1, 1, transactional=False), None)
    finally:
        c.close()
    broker.kill()
    for d in broker.data_dir.glob("__transaction_state-*"):
        shutil.rmtree(d)
    broker.start()
    c = RawTxn(broker.port)
    try:
        assert c.latest("h", 0, committed=True) == 0  # stuck behind a transaction nobody will end
        assert ketch_json(broker, "find-hanging", "--max-transaction-timeout-ms", "3600000") == []  # too young
        [h] = ketch_json(broker, "find-hanging", "--topic", "h", "--max-transaction-timeout-ms", "0")
        assert (h["topic"], h["partition"], h["producer_id"], h["start_offset"]) == ("h", 0, pid, 0)
        r = ketch(broker, "abort", "--topic", "h", "--partition", "0", "--start-offset", "7",
                  bootstrap=broker.inter_broker_bootstrap)
        assert r.returncode == 1 and "no open transaction" in r.stderr
        # markers are written only through the inter-broker listener (issue 11, item 6)
        r = ketch(broker, "abort", "--topic", "h", "--partition", "0", "--start-offset", "0")
        assert r.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in r.stderr and "inter-broker" in r.stderr
        assert c.latest("h", 0, committed=True) == 0  # nothing was written
        [a] = ketch_json(broker, "abort", "--topic", "h", "--partition", "0", "--start-offset", "0",
                         bootstrap=broker.inter_broker_bootstrap)
        assert a["producer_id"] == pid and a["aborted"]
        wait_until(lambda: c.latest("h", 0, committed=True) == c.latest("h", 0, committed=False) == 5,
                   message="LSO released by the abort marker")
        assert ketch_json(broker, "find-hanging", "--max-transaction-timeout-ms", "0") == []
    finally:
        c.close()
