"""Prepared transactions (KIP-939) in the coordinator's state machine, without I/O
(broker/txn/machine.py): a two-phase-commit id's transaction outlives any timeout, a new instance
that initialises with KeepPreparedTxn learns the ongoing transaction's producer id and epoch and
alone may end it, and 2PC is refused where the broker does not allow it."""

from __future__ import annotations

import itertools

from broker.txn.log_records import decode_value, encode_value
from broker.txn.machine import Decision, TxnStateMachine
from broker.txn.state import MAX_EPOCH, TWO_PC_TIMEOUT_MS, TxnState
from protocol.errors import ErrorCode as E

T0 = 1_000_000
TP_A = ("a", 0)
TP_B = ("b", 1)
HOUR = 3_600_000


def machine(*, allow_2pc: bool = True, max_timeout: int = 60_000) -> TxnStateMachine:
    ids = itertools.count(100)
    return TxnStateMachine(num_partitions=50, max_timeout_ms=max_timeout, id_expiration_ms=7 * 24 * HOUR,
                           allocate_producer_id=lambda: next(ids), allow_2pc=allow_2pc)


def run(m: TxnStateMachine, tid: str, d: Decision) -> Decision:
    if d.writes:
        m.complete(tid, d)
    return d


def prepared(m: TxnStateMachine, tid: str = "t", *, two_pc: bool = True) -> tuple[int, int]:
    """An id whose producer wrote to two partitions and stopped there: 'prepared' in KIP-939's
    sense (the client flushed; the coordinator sees an Ongoing transaction)."""
    d = run(m, tid, m.init_producer_id(tid, 10_000, -1, -1, T0, enable_2pc=two_pc))
    assert d.error == E.NONE, d
    assert run(m, tid, m.add_partitions(tid, d.producer_id, d.producer_epoch, [TP_A, TP_B], T0)).error == E.NONE
    return d.producer_id, d.producer_epoch


def keep(m: TxnStateMachine, tid: str = "t", now: int = T0 + 1) -> Decision:
    d = run(m, tid, m.init_producer_id(tid, 10_000, -1, -1, now, keep_prepared=True))
    assert d.error == E.NONE, d
    return d


def test_2pc_is_refused_where_the_broker_does_not_allow_it() -> None:
    m = machine(allow_2pc=False)
    d = m.init_producer_id("t", 10_000, -1, -1, T0, enable_2pc=True)
    assert d.error == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED and not d.writes
    assert m.get("t") is None
    assert m.init_producer_id("t", 10_000, -1, -1, T0).error == E.NONE  # without 2PC: as ever


def test_a_2pc_id_is_marked_by_its_timeout_whatever_it_asked_for() -> None:
    m = machine(max_timeout=60_000)
    d = m.init_producer_id("t", 900_000, -1, -1, T0, enable_2pc=True)  # past the max: no matter
    assert d.error == E.NONE and d.record is not None and d.record.timeout_ms == TWO_PC_TIMEOUT_MS
    run(m, "t", d)
    assert m.get("t").two_pc  # type: ignore[union-attr]


def test_a_prepared_transaction_is_not_aborted_by_any_timeout() -> None:
    m = machine()
    prepared(m, "2pc")
    d = run(m, "plain", m.init_producer_id("plain", 10_000, -1, -1, T0))
    run(m, "plain", m.add_partitions("plain", d.producer_id, d.producer_epoch, [TP_A], T0))
    reaped = [tid for tid, _ in m.timed_out(T0 + 1000 * HOUR, 1000 * HOUR)]
    reaped += [tid for tid, _ in m.timed_out(T0 + 2000 * HOUR, 2000 * HOUR)]
    assert reaped == ["plain"]  # the plain one, past its 10 s, is aborted; the prepared one waits
    assert m.get("2pc").state == TxnState.ONGOING and m.get("2pc").pending is None  # type: ignore[union-attr]


def test_keep_prepared_returns_the_ongoing_transaction_and_a_new_epoch_without_aborting_it() -> None:
    m = machine()
    pid, epoch = prepared(m)
    d = m.init_producer_id("t", 10_000, -1, -1, T0 + 1, keep_prepared=True)
    assert d.error == E.NONE
    assert (d.producer_id, d.producer_epoch) == (pid, epoch + 1)  # the new instance's
    assert (d.ongoing_producer_id, d.ongoing_producer_epoch) == (pid, epoch)  # the transaction's
    rec = d.record
    assert rec is not None and rec.state == TxnState.ONGOING and rec.partitions == {TP_A, TP_B}
    assert (rec.producer_id, rec.producer_epoch, rec.next_producer_id, rec.next_producer_epoch) == (
        pid, epoch, pid, epoch + 1)
    assert rec.timeout_ms == TWO_PC_TIMEOUT_MS
    assert m.complete("t", d) == []  # no markers: nothing is aborted
    meta = m.get("t")
    assert meta is not None and meta.instance == (pid, epoch + 1) and meta.start_ms == T0


def test_the_new_instance_commits_the_prepared_transaction() -> None:
    m = machine()
    pid, epoch = prepared(m)
    keep(m)
    d = m.end_txn("t", pid, epoch + 1, True, T0 + 2, bump_epoch=True)
    assert d.error == E.NONE and d.record is not None and d.record.state == TxnState.PREPARE_COMMIT
    assert (d.producer_id, d.producer_epoch) == (pid, epoch + 2)  # EndTxn v5: the next epoch
    assert d.record.next_producer_epoch == -1  # the take-over is over
    jobs = m.complete("t", d)
    assert len(jobs) == 1 and jobs[0].commit and jobs[0].partitions == {TP_A, TP_B}
    assert (jobs[0].producer_id, jobs[0].producer_epoch) == (pid, epoch + 2)  # above the data's epoch
    run(m, "t", m.markers_written(jobs[0], T0 + 3))  # type: ignore[arg-type]
    meta = m.get("t")
    assert meta is not None and meta.state == TxnState.COMPLETE_COMMIT and meta.instance == (pid, epoch + 2)


def test_the_new_instance_without_epoch_bumps_ends_it_under_its_own_epoch() -> None:
    """EndTxn before v5: the client keeps its epoch, so the markers carry it (still above the
    transaction's, which fences the old instance at the partitions)."""
    m = machine()
    pid, epoch = prepared(m)
    keep(m)
    d = m.end_txn("t", pid, epoch + 1, False, T0 + 2)
    assert d.error == E.NONE and d.record is not None and d.record.state == TxnState.PREPARE_ABORT
    jobs = m.complete("t", d)
    assert not jobs[0].commit and (jobs[0].producer_id, jobs[0].producer_epoch) == (pid, epoch + 1)
    run(m, "t", m.markers_written(jobs[0], T0 + 3))  # type: ignore[arg-type]
    assert m.get("t").state == TxnState.COMPLETE_ABORT  # type: ignore[union-attr]
    assert m.end_txn("t", pid, epoch + 1, False, T0 + 4).error == E.NONE  # a retry
    assert run(m, "t", m.add_partitions("t", pid, epoch + 1, [TP_A], T0 + 5)).error == E.NONE  # and on it goes


def test_a_stale_instance_can_neither_add_to_nor_end_the_prepared_transaction() -> None:
    m = machine()
    pid, epoch = prepared(m)
    keep(m)
    assert m.end_txn("t", pid, epoch, True, T0 + 2, bump_epoch=True).error == E.PRODUCER_FENCED
    assert m.end_txn("t", pid, epoch, True, T0 + 2).error == E.PRODUCER_FENCED
    assert m.add_partitions("t", pid, epoch, [("c", 0)], T0 + 2).error == E.PRODUCER_FENCED
    assert m.verify("t", pid, epoch, [TP_A]) == E.PRODUCER_FENCED  # its produce to a new partition too
    # the new instance may only end it (KIP-939): it has nothing of its own to add
    assert m.add_partitions("t", pid, epoch + 1, [("c", 0)], T0 + 2).error == E.INVALID_TXN_STATE
    jobs = m.complete("t", m.end_txn("t", pid, epoch + 1, True, T0 + 3, bump_epoch=True))
    run(m, "t", m.markers_written(jobs[0], T0 + 4))  # type: ignore[arg-type]
    # once committed, the stale instance cannot end it (again) either way
    for bump in (True, False):
        for commit in (True, False):
            assert m.end_txn("t", pid, epoch, commit, T0 + 5, bump_epoch=bump).error == E.PRODUCER_FENCED
    # the new instance's retry of its commit is answered as the commit was; an abort is refused
    retry = m.end_txn("t", pid, epoch + 1, True, T0 + 5, bump_epoch=True)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, pid, epoch + 2)
    assert m.end_txn("t", pid, epoch + 1, False, T0 + 5, bump_epoch=True).error == E.INVALID_TXN_STATE


def test_a_second_take_over_fences_the_first() -> None:
    m = machine()
    pid, epoch = prepared(m)
    keep(m)
    d = keep(m, now=T0 + 2)
    assert (d.producer_id, d.producer_epoch, d.ongoing_producer_id, d.ongoing_producer_epoch) == (
        pid, epoch + 2, pid, epoch)
    assert m.end_txn("t", pid, epoch + 1, True, T0 + 3, bump_epoch=True).error == E.PRODUCER_FENCED
    d = m.end_txn("t", pid, epoch + 2, True, T0 + 3, bump_epoch=True)
    assert d.error == E.NONE and m.complete("t", d)[0].producer_epoch == epoch + 3


def test_a_plain_init_aborts_a_prepared_transaction_fencing_whoever_holds_it() -> None:
    m = machine()
    pid, epoch = prepared(m)
    keep(m)
    d = m.init_producer_id("t", 10_000, -1, -1, T0 + 2)
    assert d.error == E.CONCURRENT_TRANSACTIONS and d.record is not None
    assert d.record.state == TxnState.PREPARE_ABORT and d.record.next_producer_epoch == -1
    jobs = m.complete("t", d)
    assert jobs[0].producer_epoch > epoch + 1  # above the taker's epoch as well as the data's
    run(m, "t", m.markers_written(jobs[0], T0 + 3))  # type: ignore[arg-type]
    assert m.end_txn("t", pid, epoch + 1, True, T0 + 4, bump_epoch=True).error == E.PRODUCER_FENCED


def test_keep_prepared_with_nothing_ongoing_is_an_ordinary_init() -> None:
    m = machine()
    d = run(m, "t", m.init_producer_id("t", 10_000, -1, -1, T0, enable_2pc=True))
    k = keep(m)
    assert (k.producer_id, k.producer_epoch) == (d.producer_id, d.producer_epoch + 1)
    assert (k.ongoing_producer_id, k.ongoing_producer_epoch) == (-1, -1)
    assert m.get("t").state == TxnState.EMPTY  # type: ignore[union-attr]


def test_keep_prepared_is_refused_for_a_transaction_that_is_not_2pc() -> None:
    """Its outcome belongs to its timeout: another instance committing it would race the reaper."""
    m = machine()
    pid, epoch = prepared(m, two_pc=False)
    assert m.init_producer_id("t", 10_000, -1, -1, T0 + 1, keep_prepared=True).error == E.INVALID_TXN_STATE
    meta = m.get("t")
    assert meta is not None and meta.state == TxnState.ONGOING and meta.instance == (pid, epoch)


def test_keep_prepared_while_the_previous_transaction_completes_is_retried() -> None:
    m = machine()
    pid, epoch = prepared(m)
    m.complete("t", m.end_txn("t", pid, epoch, True, T0 + 1, bump_epoch=True))
    assert m.init_producer_id("t", 10_000, -1, -1, T0 + 2, keep_prepared=True).error == E.CONCURRENT_TRANSACTIONS


def test_a_taken_over_transaction_survives_a_reload_and_is_committed_there() -> None:
    m = machine()
    pid, epoch = prepared(m)
    d = keep(m)
    assert d.record is not None
    other = machine()
    other.load("t", decode_value(encode_value(d.record)))  # another coordinator loads the log
    meta = other.get("t")
    assert meta is not None and meta.two_pc and meta.instance == (pid, epoch + 1)
    assert list(other.timed_out(T0 + 1000 * HOUR, 1000 * HOUR)) == []
    assert other.end_txn("t", pid, epoch, True, T0 + 2, bump_epoch=True).error == E.PRODUCER_FENCED
    e = other.end_txn("t", pid, epoch + 1, True, T0 + 2, bump_epoch=True)
    assert e.error == E.NONE and other.complete("t", e)[0].partitions == {TP_A, TP_B}


def test_a_take_over_with_the_epochs_exhausted_gives_the_new_instance_a_new_producer_id() -> None:
    m = machine()
    pid, _ = prepared(m)
    meta = m.get("t")
    assert meta is not None
    meta.producer_epoch = MAX_EPOCH - 2  # the transaction's epoch: one takeover left before exhaustion
    d = keep(m)
    new_pid, new_epoch = d.producer_id, d.producer_epoch
    assert new_pid != pid and new_epoch == 0 and (d.ongoing_producer_id, d.ongoing_producer_epoch) == (
        pid, MAX_EPOCH - 2)
    e = m.end_txn("t", new_pid, new_epoch, True, T0 + 2, bump_epoch=True)
    assert (e.error, e.producer_id, e.producer_epoch) == (E.NONE, new_pid, 1)
    jobs = m.complete("t", e)
    assert (jobs[0].producer_id, jobs[0].producer_epoch) == (pid, MAX_EPOCH)  # markers: the data's id
    run(m, "t", m.markers_written(jobs[0], T0 + 3))  # type: ignore[arg-type]
    meta = m.get("t")
    assert meta is not None and meta.instance == (new_pid, 1) and meta.last_producer_id == pid
    retry = m.end_txn("t", new_pid, new_epoch, True, T0 + 4, bump_epoch=True)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, new_pid, 1)
