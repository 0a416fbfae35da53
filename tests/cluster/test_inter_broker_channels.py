"""A transaction verification is not queued behind a marker that waits for the ISR.

A partition leader asks the transaction coordinator "is this partition in the producer's
transaction?" (KIP-890 verification) before it appends a transactional batch. The broker that is
asked serves a connection's transactional requests in order; when the verification shared its
connection with the WriteTxnMarkers of the asking broker's own coordinator, it waited behind a
marker that waits up to 5 s for the ISR, timed out, and closed the connection under the marker: the
producer got an error for a transaction nothing was wrong with. Three real brokers: broker L leads
`slow` (follower F paused, so markers to L wait), broker A coordinates the committing transaction
and leads `fast`, where the other transaction (coordinated by L) produces.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers.cluster import Cluster
from helpers.cluster_metadata import coordinator, listed_everywhere, new_topic, voters_for
from helpers.txn import RawTxn, txn_batch


@pytest.fixture
def cluster(cluster_factory) -> Cluster:  # type: ignore[no-untyped-def]
    """The default session timeout (a paused follower stays in the ISR longer than a marker waits),
    and `__transaction_state` on one replica, so only the markers wait for the paused broker."""
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env={"KETCH_TRANSACTION_STATE_REPLICATION_FACTOR": "1"})
    listed_everywhere(c)
    return c


def _tid_coordinated_by(c: Cluster, node: int, prefix: str) -> str:
    found: list[str] = []

    def look() -> bool:
        for i in range(200):
            tid = f"{prefix}-{i}"
            if coordinator(c.ports[1], tid, 1) == node:
                found.append(tid)
                return True
        return False

    c.wait_until(look, timeout=30, message=f"a transactional id coordinated by broker {node}")
    return found[0]


def _log_bytes(c: Cluster, node: int, topic: str) -> int:
    return sum(f.stat().st_size for f in Path(c[node].data_dir).glob(f"{topic}-*/*.log"))


def test_a_verification_is_answered_while_a_marker_to_the_same_broker_waits_for_the_isr(cluster: Cluster) -> None:
    c = cluster
    slow = new_topic(c, "slow", 1, 2)
    _, leader, replicas, _ = slow.partitions[0]
    follower = next(n for n in replicas if n != leader)
    asker = next(n for n in c.node_ids if n not in replicas)
    fast = new_topic(c, "fast", 6, 1)
    fast_p = next(i for i, p in enumerate(fast.partitions) if p[1] == asker)

    committing = _tid_coordinated_by(c, asker, "committing")  # markers go asker -> leader
    verified = _tid_coordinated_by(c, leader, "verified")  # verification goes asker -> leader

    at_asker, at_leader = RawTxn(c.ports[asker]), RawTxn(c.ports[leader])
    try:
        # A first transaction, committed with every broker up, opens the asker's connection to the leader.
        pid1, epoch1 = at_asker.init_ok(committing)
        assert at_asker.add_partitions(committing, pid1, epoch1, {"slow": [0]}) == {("slow", 0): 0}
        assert at_leader.produce("slow", 0, txn_batch(pid1, epoch1, 0), committing)[0] == 0
        assert at_asker.end(committing, pid1, epoch1, commit=True).error_code == 0
        c.wait_until(lambda: at_asker.describe(committing).transaction_state == "CompleteCommit",
                     timeout=15, message="the first commit's markers written")
        assert at_asker.add_partitions(committing, pid1, epoch1, {"slow": [0]}) == {("slow", 0): 0}
        assert at_leader.produce("slow", 0, txn_batch(pid1, epoch1, 1), committing)[0] == 0

        pid2, epoch2 = at_leader.init_ok(verified)
        assert at_leader.add_partitions(verified, pid2, epoch2, {"fast": [fast_p]}) == {("fast", fast_p): 0}

        c.pause(follower)
        try:
            # The second transaction's abort marker: appended at the leader, then waiting for the ISR.
            before = _log_bytes(c, leader, "slow")
            assert at_asker.end(committing, pid1, epoch1, commit=False).error_code == 0
            c.wait_until(lambda: _log_bytes(c, leader, "slow") > before, timeout=10,
                         message="the marker appended at the partition leader")
            start = time.monotonic()
            error, _ = at_asker.produce("fast", fast_p, txn_batch(pid2, epoch2, 0), verified)
            took = time.monotonic() - start
            assert error == 0, f"the produce needing verification failed with {error} after {took:.1f}s"
            assert took < 2.5, f"the verification waited {took:.1f}s behind the marker"
        finally:
            c.resume(follower)
        c.wait_until(lambda: at_asker.describe(committing).transaction_state == "CompleteAbort",
                     timeout=30, message="the abort's markers written once the follower is back")
    finally:
        at_asker.close()
        at_leader.close()
