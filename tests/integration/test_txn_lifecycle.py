"""Transactions over time: the reaper's timeouts and expiry, and the coordinator rebuilt from
`__transaction_state` after a SIGKILL."""

from __future__ import annotations

from helpers import BrokerProcess, wait_until
from helpers.txn import RawTxn, txn_batch

from protocol.errors import ErrorCode as E

FAST_REAPER = {"KETCH_TRANSACTION_ABORT_TIMED_OUT_INTERVAL_MS": "100"}


def test_abandoned_transaction_is_aborted_after_its_timeout(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b: BrokerProcess = broker_factory(env=FAST_REAPER)
    c = RawTxn(b.port)
    try:
        c.create_topic("t", 1)
        pid, epoch = c.init_ok("zombie", timeout_ms=1_500)
        c.add_partitions("zombie", pid, epoch, {"t": [0]})
        assert c.produce("t", 0, txn_batch(pid, epoch, 0, 3), "zombie") == (0, 0)
        c.produce("t", 0, txn_batch(-1, -1, -1, 2, transactional=False), None)  # later plain data: 3-4
        assert c.latest("t", 0, committed=True) == 0  # held back by the open transaction
        # The producer "disappears". The reaper aborts; read_committed moves past it.
        wait_until(lambda: c.latest("t", 0, committed=True) == c.latest("t", 0, committed=False), timeout=15,
                   message="timed-out transaction aborted")
        assert c.latest("t", 0, committed=True) == 6  # 3 + 2 data, and the abort marker
        # The coordinator completes the abort once the marker is written: a moment after it shows
        # in the partition (longer on a busy machine), so that is waited for, not assumed.
        desc = wait_until(lambda: (d := c.describe("zombie")).transaction_state == "CompleteAbort" and d,
                          timeout=15, message="the coordinator to complete the abort")
        assert desc.producer_epoch == epoch + 2  # fence + abort
        # If it comes back it finds itself fenced, everywhere.
        assert c.end("zombie", pid, epoch, True).error_code == E.PRODUCER_FENCED
        assert c.produce("t", 0, txn_batch(pid, epoch, 3, 1), "zombie")[0] == E.INVALID_PRODUCER_EPOCH
    finally:
        c.close()


def test_idle_transactional_ids_expire(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b: BrokerProcess = broker_factory(env={**FAST_REAPER, "KETCH_TRANSACTIONAL_ID_EXPIRATION_MS": "500"})
    c = RawTxn(b.port)
    try:
        c.create_topic("t", 1)
        pid, epoch = c.init_ok("idle")
        pid_b, epoch_b = c.init_ok("busy", timeout_ms=60_000)
        c.add_partitions("busy", pid_b, epoch_b, {"t": [0]})
        wait_until(lambda: c.describe("idle").error_code == E.TRANSACTIONAL_ID_NOT_FOUND, timeout=15,
                   message="idle id removed")
        assert c.describe("busy").transaction_state == "Ongoing"  # an open transaction keeps it
        # Removal is durable: a restart does not bring it back.
        b.restart(kill=True)
        c.close()
        c = RawTxn(b.port)
        assert c.describe("idle").error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        assert c.describe("busy").transaction_state == "Ongoing"
    finally:
        c.close()


def test_coordinator_state_survives_sigkill(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b: BrokerProcess = broker_factory(env=FAST_REAPER)
    c = RawTxn(b.port)
    try:
        c.create_topic("t", 2)
        pid, epoch = c.init_ok("done")
        c.add_partitions("done", pid, epoch, {"t": [0]})
        c.produce("t", 0, txn_batch(pid, epoch, 0, 2), "done")
        assert c.end("done", pid, epoch, True).error_code == 0
        wait_until(lambda: c.describe("done").transaction_state == "CompleteCommit", message="commit")
        pid2, e2 = c.init_ok("open", timeout_ms=3_000)
        c.add_partitions("open", pid2, e2, {"t": [1]})
        c.produce("t", 1, txn_batch(pid2, e2, 0, 2), "open")

        b.restart(kill=True)
        c.close()
        c = RawTxn(b.port)
        done = c.describe("done")
        assert (done.transaction_state, done.producer_id, done.producer_epoch) == ("CompleteCommit", pid, epoch)
        still = c.describe("open")
        assert still.transaction_state == "Ongoing" and [(t.topic, t.partitions) for t in still.topics] == [("t", [1])]
        # Producer state and the LSO came back from the partition log too.
        assert c.latest("t", 1, committed=True) == 0
        assert c.producers("t", 1)[0].current_txn_start_offset == 0
        # The same producer id comes back with the next epoch (ids are not reissued).
        assert c.init_ok("done") == (pid, epoch + 1)
        # The open transaction is still timed from its real start, and aborted.
        wait_until(lambda: c.describe("open").transaction_state == "CompleteAbort", timeout=15,
                   message="recovered open transaction times out")
        assert c.latest("t", 1, committed=True) == c.latest("t", 1, committed=False) == 3
    finally:
        c.close()


def _txn_state_counts(c: RawTxn) -> tuple[int, int]:
    """(records still in __transaction_state, offsets ever used): compaction makes the first smaller."""
    from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
    from protocol.records import decode_batches

    present = used = 0
    for p in range(50):
        end = c.latest("__transaction_state", p, committed=False)
        used += end
        offset = 0
        while offset < end:
            resp = c.request(FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                topics=[FetchTopic(topic="__transaction_state", partitions=[
                    FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=1 << 20)])]), 4)
            assert isinstance(resp, FetchResponse)
            part = resp.responses[0].partitions[0]
            assert part.error_code == 0, part
            batches = list(decode_batches(part.records or b""))
            assert batches, f"no progress reading __transaction_state-{p} at {offset}"
            for h, records in batches:
                present += len(records)
                offset = h.base_offset + h.last_offset_delta + 1
    return present, used


def test_coordinator_reloads_a_compacted_transaction_log_after_sigkill(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """__transaction_state is compacted like __consumer_offsets: only the latest state of each id
    survives. A coordinator rebuilt from the compacted log after SIGKILL must know every id's
    producer id and epoch, and abort the transaction that was open."""
    b: BrokerProcess = broker_factory(env={**FAST_REAPER, "KETCH_TRANSACTION_STATE_SEGMENT_BYTES": "1024",
                                           "KETCH_LOG_RETENTION_CHECK_INTERVAL_MS": "200"})
    c = RawTxn(b.port)
    try:
        c.create_topic("t", 1)
        pid, epoch = c.init_ok("busy")
        for seq in range(30):
            c.add_partitions("busy", pid, epoch, {"t": [0]})
            assert c.produce("t", 0, txn_batch(pid, epoch, seq), "busy")[0] == 0
            assert c.end("busy", pid, epoch, True).error_code == 0
            wait_until(lambda: c.describe("busy").transaction_state == "CompleteCommit", timeout=15,
                       message="commit completed")
        open_pid, open_epoch = c.init_ok("open")
        c.add_partitions("open", open_pid, open_epoch, {"t": [0]})
        assert c.produce("t", 0, txn_batch(open_pid, open_epoch, 0, 2, value=b"ABORTED"), "open")[0] == 0

        def compacted() -> bool:
            present, used = _txn_state_counts(c)
            return present < used // 2

        wait_until(compacted, timeout=60, message="the log cleaner to compact __transaction_state")
        b.restart(kill=True)
        c.close()
        c = RawTxn(b.port)

        desc = c.describe("busy")
        assert (desc.transaction_state, desc.producer_id, desc.producer_epoch) == ("CompleteCommit", pid, epoch)
        assert c.init_ok("busy") == (pid, epoch + 1)
        # the open transaction is fenced and aborted: read_committed moves past its records
        assert c.init_ok("open") == (open_pid, open_epoch + 3)  # +2 to fence and abort, +1 for the new session
        wait_until(lambda: c.latest("t", 0, committed=True) == c.latest("t", 0, committed=False), timeout=15,
                   message="the open transaction aborted")
    finally:
        c.close()
