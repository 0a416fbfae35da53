"""A prepared transaction (KIP-939) outlives its coordinator: on three real broker processes a
process prepares a transaction and is SIGKILLed, the broker coordinating its transactional id is
SIGKILLed, and another process commits the transaction from its token through the coordinator
that took over — which found it in `__transaction_state` (replicated, 2PC mark and all)."""

from __future__ import annotations

import asyncio
import time

from helpers.cluster import Cluster
from helpers.cluster_metadata import SHORT_SESSION, coordinator, listed_everywhere, new_topic, voters_for
from helpers.consume import read_records
from helpers.raw import Raw
from helpers.two_phase import complete_elsewhere, kill, start_preparer, values
from helpers.txn import RawTxn

from protocol.messages.metadata import MetadataRequest, MetadataResponse

TXN_KEY = 1


def _controller(c: Cluster, node: int) -> int:
    raw = Raw(c.ports[node])
    try:
        resp = raw.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
    finally:
        raw.close()
    assert isinstance(resp, MetadataResponse)
    return resp.controller_id


async def test_a_prepared_transaction_is_committed_from_another_process_after_its_coordinator_dies(
        cluster_factory) -> None:  # type: ignore[no-untyped-def]
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env={**SHORT_SESSION,
                                      "KETCH_TRANSACTION_TWO_PHASE_COMMIT_ENABLE": "true"})
    listed_everywhere(c)
    layout = new_topic(c, "two-phase", 2, 3, {"min.insync.replicas": "2"})
    assert layout.partitions
    c.wait_until(lambda: coordinator(c.ports[1], "probe", TXN_KEY) in c.node_ids, timeout=30,
                 message="__transaction_state to have leaders")
    # An id coordinated by a broker that is not the active controller: its death then moves the
    # coordinator without also waiting for a new controller (a test-time choice, not a limit).
    controller = _controller(c, 1)
    tid = next(t for t in (f"app-{i}" for i in range(300)) if coordinator(c.ports[1], t, TXN_KEY) not in (controller, -1))
    node = coordinator(c.ports[1], tid, TXN_KEY)

    proc, token = start_preparer(c.bootstrap, tid, "two-phase", 20)
    kill(proc)
    c.kill(node)  # the coordinator of record is gone
    survivors = [n for n in c.node_ids if n != node]
    bootstrap = ",".join(f"127.0.0.1:{c.ports[n]}" for n in survivors)
    c.wait_until(lambda: coordinator(c.ports[survivors[0]], tid, TXN_KEY) in survivors, timeout=30,
                 message="another broker to coordinate the id")

    assert complete_elsewhere(bootstrap, token, commit=True)

    def completed() -> bool:
        raw = RawTxn(c.ports[coordinator(c.ports[survivors[0]], tid, TXN_KEY)])
        try:
            return raw.describe(tid).transaction_state == "CompleteCommit"
        finally:
            raw.close()

    c.wait_until(completed, timeout=30, message="the new coordinator to complete the commit")
    want = sorted(values(tid, 20))
    deadline = time.monotonic() + 30
    while (got := sorted(r.value or b"" for r in await read_records(bootstrap, "two-phase", 2, "read_committed"))
           ) != want and time.monotonic() < deadline:
        await asyncio.sleep(0.2)  # a partition's last stable offset follows its marker's replication
    assert got == want
