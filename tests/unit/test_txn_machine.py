"""The transaction coordinator's state machine, driven without I/O (broker/txn/machine.py)."""

from __future__ import annotations

import itertools

import pytest

from broker.txn.log_records import decode_value, encode_value
from broker.txn.machine import Decision, MarkerJob, TxnStateMachine
from broker.txn.state import MAX_EPOCH, TxnMetadata, TxnState
from protocol.errors import ErrorCode as E

T0 = 1_000_000
TP_A = ("a", 0)
TP_B = ("b", 1)


def machine(**kw: int) -> TxnStateMachine:
    ids = itertools.count(100)
    return TxnStateMachine(num_partitions=kw.get("num_partitions", 50), max_timeout_ms=kw.get("max_timeout", 60_000),
                           id_expiration_ms=kw.get("expiration", 3_600_000), allocate_producer_id=lambda: next(ids))


def run(m: TxnStateMachine, tid: str, d: Decision) -> Decision:
    """What the shell does when the write succeeds: apply the record (returns the decision)."""
    if d.writes:
        m.complete(tid, d)
    return d


def init(m: TxnStateMachine, tid: str = "t", timeout: int = 10_000, now: int = T0) -> tuple[int, int]:
    d = run(m, tid, m.init_producer_id(tid, timeout, -1, -1, now))
    assert d.error == E.NONE, d
    return d.producer_id, d.producer_epoch


def ongoing(m: TxnStateMachine, tid: str = "t", parts: tuple[tuple[str, int], ...] = (TP_A, TP_B),
            now: int = T0) -> tuple[int, int]:
    pid, epoch = init(m, tid, now=now)
    assert run(m, tid, m.add_partitions(tid, pid, epoch, parts, now)).error == E.NONE
    return pid, epoch


def test_first_init_allocates_id_and_epoch_zero_and_writes_empty() -> None:
    m = machine()
    d = m.init_producer_id("t", 10_000, -1, -1, T0)
    assert d.record is not None and d.record.state == TxnState.EMPTY
    assert (d.producer_id, d.producer_epoch) == (100, 0)
    assert m.get("t").pending == TxnState.EMPTY  # type: ignore[union-attr]
    # While the write is in flight the id is busy.
    assert m.init_producer_id("t", 10_000, -1, -1, T0).error == E.CONCURRENT_TRANSACTIONS
    m.complete("t", d)
    assert m.get("t").state == TxnState.EMPTY and m.get("t").pending is None  # type: ignore[union-attr]


def test_timeout_is_validated_against_max() -> None:
    m = machine(max_timeout=5_000)
    assert m.init_producer_id("t", 5_001, -1, -1, T0).error == E.INVALID_TRANSACTION_TIMEOUT
    assert m.init_producer_id("t", 0, -1, -1, T0).error == E.INVALID_TRANSACTION_TIMEOUT
    assert m.get("t") is None
    assert m.init_producer_id("t", 5_000, -1, -1, T0).error == E.NONE


def test_second_init_bumps_epoch_and_fences_the_first() -> None:
    m = machine()
    pid, e0 = init(m)
    pid2, e1 = init(m)
    assert (pid2, e1) == (pid, e0 + 1)
    assert m.add_partitions("t", pid, e0, [TP_A], T0).error == E.PRODUCER_FENCED
    assert m.end_txn("t", pid, e0, True, T0).error == E.PRODUCER_FENCED
    assert m.verify("t", pid, e0, [TP_A]) == E.PRODUCER_FENCED


def test_init_with_ongoing_transaction_aborts_it_first_under_a_bumped_epoch() -> None:
    m = machine()
    pid, epoch = ongoing(m)
    d = m.init_producer_id("t", 10_000, -1, -1, T0 + 5)
    assert d.error == E.CONCURRENT_TRANSACTIONS
    assert d.record is not None and d.record.state == TxnState.PREPARE_ABORT
    assert d.record.producer_epoch == epoch + 2  # the fence, and the abort's own bump (Kafka's TV2)
    assert m.visible_state(m.get("t")) == TxnState.PREPARE_EPOCH_FENCE  # type: ignore[arg-type]
    jobs = m.complete("t", d)
    assert len(jobs) == 1 and not jobs[0].commit and jobs[0].partitions == {TP_A, TP_B}
    assert jobs[0].producer_epoch == epoch + 2  # the markers themselves fence the old instance
    # The retry answers CONCURRENT_TRANSACTIONS until the abort completed ...
    assert m.init_producer_id("t", 10_000, -1, -1, T0 + 6).error == E.CONCURRENT_TRANSACTIONS
    run(m, "t", m.markers_written(jobs[0], T0 + 7))  # type: ignore[arg-type]
    assert m.get("t").state == TxnState.COMPLETE_ABORT  # type: ignore[union-attr]
    # ... and then gets yet another epoch.
    assert init(m) == (pid, epoch + 3)


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    m = machine()
    pid, _ = init(m)
    meta = m.get("t")
    assert meta is not None
    meta.producer_epoch = MAX_EPOCH - 1
    new_pid, epoch = init(m)
    assert new_pid != pid and epoch == 0
    assert m.get("t").last_producer_id == pid  # type: ignore[union-attr]


def test_kip360_recovery_with_own_id_bumps_and_retry_is_idempotent() -> None:
    m = machine()
    pid, e0 = init(m)
    d = run(m, "t", m.init_producer_id("t", 10_000, pid, e0, T0))
    assert (d.error, d.producer_id, d.producer_epoch) == (E.NONE, pid, e0 + 1)
    retry = run(m, "t", m.init_producer_id("t", 10_000, pid, e0, T0))
    assert (retry.error, retry.producer_epoch) == (E.NONE, e0 + 1)
    assert m.init_producer_id("t", 10_000, pid + 5, 0, T0).error == E.PRODUCER_FENCED
    init(m)  # another instance takes over (no expected epoch) ...
    assert m.init_producer_id("t", 10_000, pid, e0, T0).error == E.PRODUCER_FENCED  # ... the old one is out


def test_add_partitions_errors_and_state() -> None:
    m = machine()
    assert m.add_partitions("nope", 1, 0, [TP_A], T0).error == E.INVALID_PRODUCER_ID_MAPPING
    pid, epoch = init(m)
    assert m.add_partitions("t", pid + 1, epoch, [TP_A], T0).error == E.INVALID_PRODUCER_ID_MAPPING
    assert m.add_partitions("t", pid, epoch + 1, [TP_A], T0).error == E.PRODUCER_FENCED
    d = run(m, "t", m.add_partitions("t", pid, epoch, [TP_A], T0 + 1))
    assert d.record is not None and d.record.state == TxnState.ONGOING and d.record.start_ms == T0 + 1
    # Already there: answered without a write.
    assert not m.add_partitions("t", pid, epoch, [TP_A], T0 + 2).writes
    d = run(m, "t", m.add_partitions("t", pid, epoch, [TP_B], T0 + 3))
    assert d.record is not None and d.record.partitions == {TP_A, TP_B} and d.record.start_ms == T0 + 1


def test_add_partitions_while_completing_is_concurrent_and_after_completion_starts_fresh() -> None:
    m = machine()
    pid, epoch = ongoing(m)
    jobs = m.complete("t", m.end_txn("t", pid, epoch, True, T0 + 10))
    assert m.add_partitions("t", pid, epoch, [TP_A], T0 + 11).error == E.CONCURRENT_TRANSACTIONS
    assert m.verify("t", pid, epoch, [TP_A]) == E.CONCURRENT_TRANSACTIONS
    run(m, "t", m.markers_written(jobs[0], T0 + 12))  # type: ignore[arg-type]
    d = run(m, "t", m.add_partitions("t", pid, epoch, [TP_B], T0 + 13))
    assert d.record is not None and d.record.partitions == {TP_B} and d.record.start_ms == T0 + 13


def test_end_txn_without_add_partitions_is_invalid_txn_state() -> None:
    m = machine()
    pid, epoch = init(m)
    assert m.end_txn("t", pid, epoch, True, T0) == Decision(error=E.INVALID_TXN_STATE)
    assert m.end_txn("t", pid, epoch, False, T0) == Decision(error=E.INVALID_TXN_STATE)


def test_end_txn_commit_flow_and_retries() -> None:
    m = machine()
    pid, epoch = ongoing(m)
    d = m.end_txn("t", pid, epoch, True, T0 + 1)
    assert d.error == E.NONE and d.record is not None and d.record.state == TxnState.PREPARE_COMMIT
    jobs = m.complete("t", d)
    assert [j.commit for j in jobs] == [True]
    assert m.end_txn("t", pid, epoch, True, T0).error == E.CONCURRENT_TRANSACTIONS  # retry while completing
    assert m.end_txn("t", pid, epoch, False, T0).error == E.INVALID_TXN_STATE  # abort after commit: no
    done = m.markers_written(jobs[0], T0 + 2)
    assert done is not None and done.record is not None and done.record.state == TxnState.COMPLETE_COMMIT
    assert done.record.partitions == frozenset()
    run(m, "t", done)
    assert m.end_txn("t", pid, epoch, True, T0).error == E.NONE  # a retry of the commit
    assert m.end_txn("t", pid, epoch, False, T0).error == E.INVALID_TXN_STATE
    assert m.markers_written(jobs[0], T0 + 3) is None  # a second report changes nothing


def test_end_txn_identity_errors() -> None:
    m = machine()
    assert m.end_txn("ghost", 1, 0, True, T0).error == E.INVALID_PRODUCER_ID_MAPPING
    pid, epoch = ongoing(m)
    assert m.end_txn("t", pid + 1, epoch, True, T0).error == E.INVALID_PRODUCER_ID_MAPPING
    assert m.end_txn("t", pid, epoch - 1, True, T0).error == E.PRODUCER_FENCED
    assert m.end_txn("t", pid, epoch + 1, True, T0).error == E.PRODUCER_FENCED
    assert m.get("t").state == TxnState.ONGOING  # type: ignore[union-attr]


def test_epoch_bump_end_txn_fences_a_late_end_of_the_previous_transaction() -> None:
    m = machine()
    pid, e0 = ongoing(m)
    d = m.end_txn("t", pid, e0, True, T0 + 1, bump_epoch=True)
    assert (d.producer_id, d.producer_epoch) == (pid, e0 + 1)
    jobs = m.complete("t", d)
    assert jobs[0].producer_epoch == e0 + 1  # markers under the new epoch
    run(m, "t", m.markers_written(jobs[0], T0 + 2))  # type: ignore[arg-type]
    # The client retries its EndTxn (old epoch): the same answer, nothing written.
    retry = m.end_txn("t", pid, e0, True, T0 + 3, bump_epoch=True)
    assert (retry.error, retry.producer_epoch, retry.writes) == (E.NONE, e0 + 1, False)
    # A new transaction under the new epoch ...
    assert run(m, "t", m.add_partitions("t", pid, e0 + 1, [TP_A], T0 + 4)).error == E.NONE
    # ... cannot be ended by a late EndTxn of the previous one.
    assert m.end_txn("t", pid, e0, True, T0 + 5, bump_epoch=True).error == E.PRODUCER_FENCED
    assert m.end_txn("t", pid, e0, False, T0 + 5, bump_epoch=True).error == E.PRODUCER_FENCED
    assert m.get("t").state == TxnState.ONGOING  # type: ignore[union-attr]


def test_epoch_bump_end_txn_rotates_an_exhausted_id_at_completion() -> None:
    m = machine()
    pid, _ = ongoing(m)
    m.get("t").producer_epoch = MAX_EPOCH - 2  # type: ignore[union-attr]
    d = m.end_txn("t", pid, MAX_EPOCH - 2, False, T0, bump_epoch=True)
    assert d.producer_epoch == 0 and d.producer_id != pid
    jobs = m.complete("t", d)
    assert jobs[0].producer_id == pid  # markers still for the id that wrote the data
    # The client may already use its new id: it is told to wait, not that the id is unknown.
    assert m.add_partitions("t", d.producer_id, 0, [TP_A], T0).error == E.CONCURRENT_TRANSACTIONS
    run(m, "t", m.markers_written(jobs[0], T0 + 1))  # type: ignore[arg-type]
    meta = m.get("t")
    assert meta is not None and (meta.producer_id, meta.producer_epoch) == (d.producer_id, 0)
    assert run(m, "t", m.add_partitions("t", d.producer_id, 0, [TP_A], T0 + 2)).error == E.NONE


def test_verify_only_accepts_partitions_of_the_ongoing_transaction() -> None:
    m = machine()
    pid, epoch = init(m)
    # Not in the ongoing transaction: Kafka's coordinator answers TRANSACTION_ABORTABLE, which the
    # partition leader turns into INVALID_TXN_STATE only for clients that predate it (KIP-1050).
    assert m.verify("t", pid, epoch, [TP_A]) == E.TRANSACTION_ABORTABLE  # no transaction open
    run(m, "t", m.add_partitions("t", pid, epoch, [TP_A], T0))
    assert m.verify("t", pid, epoch, [TP_A]) == E.NONE
    assert m.verify("t", pid, epoch, [TP_B]) == E.TRANSACTION_ABORTABLE
    assert m.verify("ghost", pid, epoch, [TP_A]) == E.INVALID_PRODUCER_ID_MAPPING


def test_timed_out_transactions_are_fenced_and_aborted() -> None:
    m = machine()
    pid, epoch = ongoing(m, now=T0)
    assert list(m.timed_out(T0 + 10_000, T0 + 10_000)) == []  # exactly at the timeout: not yet
    [(tid, d)] = list(m.timed_out(T0 + 10_001, T0 + 10_001))
    assert tid == "t" and d.record is not None and d.record.state == TxnState.PREPARE_ABORT
    assert d.record.producer_epoch == epoch + 2
    assert list(m.timed_out(T0 + 20_000, T0 + 20_000)) == []  # in flight: not twice
    jobs = m.complete("t", d)
    run(m, "t", m.markers_written(jobs[0], T0 + 10_002))  # type: ignore[arg-type]
    # The zombie's commit is refused.
    assert m.end_txn("t", pid, epoch, True, T0 + 10_003).error == E.PRODUCER_FENCED


HOUR = 3_600_000


def test_a_wall_clock_step_back_does_not_keep_a_transaction_open() -> None:
    """Seed 18 of the simulation: the coordinator's wall clock stepped an hour back."""
    m = machine()
    ongoing(m, now=T0)
    mono = 5_000  # the monotonic clock's origin is its own
    assert list(m.timed_out(T0 + 4_000, mono)) == []  # the reaper's first look: 6 s of 10 left
    assert list(m.timed_out(T0 + 6_000 - HOUR, mono + 6_000)) == []
    [(tid, d)] = list(m.timed_out(T0 + 6_001 - HOUR, mono + 6_001))
    assert tid == "t" and d.record is not None and d.record.state == TxnState.PREPARE_ABORT


def test_a_transaction_started_on_a_clock_ahead_times_out_a_timeout_after_this_coordinator_first_saw_it() -> None:
    """Loaded from a coordinator whose wall clock was an hour ahead of this one's: the recorded start
    is in this coordinator's future, so the whole timeout is still to run — from now, not from then."""
    m = machine()
    pid, epoch = ongoing(m, now=T0 + HOUR)
    fresh = machine()
    fresh.load("t", m.txns["t"].record())
    assert list(fresh.timed_out(T0, 0)) == []
    assert list(fresh.timed_out(T0 + 10_000, 10_000)) == []
    [(_, d)] = list(fresh.timed_out(T0 + 10_001, 10_001))
    assert d.record is not None and d.record.state == TxnState.PREPARE_ABORT


def test_a_transaction_past_its_timeout_on_the_wall_clock_when_first_seen_is_aborted_at_once() -> None:
    """Loaded late, or the clock stepped forward before the reaper first looked: as Kafka, aborted
    (an abort is always safe); the monotonic clock only ever postpones by at most one timeout."""
    m = machine()
    ongoing(m, now=T0)
    [(_, d)] = list(m.timed_out(T0 + HOUR, 0))
    assert d.record is not None and d.record.state == TxnState.PREPARE_ABORT


def test_each_transaction_of_an_id_gets_its_own_timeout() -> None:
    m = machine()
    pid, epoch = ongoing(m, now=T0)
    assert list(m.timed_out(T0 + 5_000, T0 + 5_000)) == []  # the first transaction's deadline is set
    jobs = m.complete("t", m.end_txn("t", pid, epoch, True, T0 + 6_000))
    run(m, "t", m.markers_written(jobs[0], T0 + 6_000))  # type: ignore[arg-type]
    run(m, "t", m.add_partitions("t", pid, epoch, [TP_A], T0 + 9_000))
    assert list(m.timed_out(T0 + 10_001, T0 + 10_001)) == []  # the second began at 9 s: 10 s from then
    assert list(m.timed_out(T0 + 19_000, T0 + 19_000)) == []
    [(_, d)] = list(m.timed_out(T0 + 19_001, T0 + 19_001))
    assert d.record is not None and d.record.state == TxnState.PREPARE_ABORT


def test_idle_ids_expire_but_not_with_a_transaction_open() -> None:
    m = machine(expiration=1_000)
    init(m, "idle", now=T0)
    ongoing(m, "busy", now=T0)
    [(tid, d)] = list(m.expired(T0 + 1_001))
    assert tid == "idle" and d.remove
    assert m.visible_state(m.get("idle")) == TxnState.DEAD  # type: ignore[arg-type]
    m.complete("idle", d)
    assert m.get("idle") is None and m.get("busy") is not None


def test_abandon_forgets_a_never_written_id_and_clears_pending() -> None:
    m = machine()
    m.abandon("new", m.init_producer_id("new", 10_000, -1, -1, T0))
    assert m.get("new") is None
    pid, epoch = init(m)
    m.abandon("t", m.add_partitions("t", pid, epoch, [TP_A], T0))
    meta = m.get("t")
    assert meta is not None and meta.pending is None and meta.state == TxnState.EMPTY


def test_reload_rebuilds_cache_and_finds_prepared_transactions() -> None:
    m = machine()
    pid, epoch = ongoing(m, "t1")
    prepared = m.end_txn("t1", pid, epoch, True, T0)
    m.complete("t1", prepared)
    init(m, "t2")
    records = [(tid, meta.record()) for tid, meta in m.txns.items()]
    fresh = machine()
    for tid, rec in records:
        fresh.load(tid, rec)
    fresh.load("gone", records[0][1])
    fresh.load("gone", None)  # a tombstone removes it again
    assert set(fresh.txns) == {"t1", "t2"}
    [job] = fresh.recovered_jobs()
    assert (job.transactional_id, job.commit, job.partitions) == ("t1", True, {TP_A, TP_B})


@pytest.mark.parametrize("state_after", ["commit", "abort"])
def test_illegal_transitions_are_caught(state_after: str) -> None:
    m = machine()
    pid, epoch = init(m)
    with pytest.raises(AssertionError):
        m._begin(m.get("t"), m.get("t").record(state=TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
                                               if state_after == "commit" else TxnState.COMPLETE_ABORT))


def test_markers_of_an_earlier_load_do_not_complete_after_a_reload() -> None:
    """A job queued under coordinator epoch 0 reports back after the partition was reloaded under
    epoch 1: completing from it would act on state this load never decided; the reload's own job
    does it."""
    m = machine()
    pid, epoch = ongoing(m)
    old_job = m.complete("t", m.end_txn("t", pid, epoch, True, T0 + 1))[0]
    m.coordinator_epochs[m.partition_of("t")] = 1  # unloaded and loaded again, the record replayed
    assert m.markers_written(old_job, T0 + 2) is None
    [new_job] = [j for j in m.recovered_jobs() if j.transactional_id == "t"]
    assert new_job.coordinator_epoch == 1
    done = m.markers_written(new_job, T0 + 3)
    assert done is not None and done.record is not None and done.record.state == TxnState.COMPLETE_COMMIT


def test_timers_leave_alone_the_ids_of_a_partition_still_loading() -> None:
    """A partition being read back holds part of its ids: timing one out there would decide on
    state not fully loaded. The timers skip ids not served, untouched (nothing left pending)."""
    m = machine(expiration=1_000)
    ongoing(m, "loading", now=T0)
    init(m, "idle", now=T0)
    assert list(m.timed_out(T0 + 60_000, T0 + 60_000, lambda tid: tid != "loading")) == []
    assert m.get("loading").pending is None  # type: ignore[union-attr]
    assert list(m.expired(T0 + 60_000, lambda tid: False)) == []
    assert m.get("idle").pending is None  # type: ignore[union-attr]
    [(tid, _)] = list(m.timed_out(T0 + 60_000, T0 + 60_000))
    assert tid == "loading"


# ---- decisions checked against the state they are written on (issue 23 item 9) ----------------
def _reload(m: TxnStateMachine, epoch: int, records: dict[str, TxnMetadata]) -> None:
    """The partition of these ids moved away and came back under coordinator epoch `epoch`; its
    log now says `records` (what the other coordinator decided meanwhile)."""
    for p in {m.partition_of(tid) for tid in records}:
        m.unload_partition(p)
        m.coordinator_epochs[p] = epoch
    for tid, meta in records.items():
        m.load(tid, meta.record())


def _newer_transaction(m: TxnStateMachine, tid: str, now: int) -> TxnMetadata:
    """What another coordinator made of `tid` meanwhile: fenced, re-initialised, a new transaction."""
    meta = m.get(tid)
    assert meta is not None
    return TxnMetadata.from_record(tid, meta.record(producer_epoch=meta.producer_epoch + 2, state=TxnState.ONGOING,
                                                    partitions=frozenset({TP_B}), start_ms=now, update_ms=now))


def test_a_timeout_decided_before_the_partition_moved_away_and_back_is_not_applied() -> None:
    m = machine()
    ongoing(m, now=T0)
    [(tid, stale)] = list(m.timed_out(T0 + 10_001, T0 + 10_001))
    newer = _newer_transaction(m, "t", T0 + 20_000)
    _reload(m, 1, {"t": newer})
    assert m.complete("t", stale) == []  # written anyway, it applies nothing
    assert not m.current("t", stale)  # (and the shell does not write it)
    meta = m.get("t")
    assert meta is not None and (meta.state, meta.producer_epoch, meta.pending) == \
        (TxnState.ONGOING, newer.producer_epoch, None)
    # a stale failure does not clear the transition the reloaded id has in flight
    fresh = m.add_partitions("t", meta.producer_id, meta.producer_epoch, [TP_A], T0 + 20_001)
    assert m.current("t", fresh)
    m.abandon("t", stale)
    assert meta.pending == TxnState.ONGOING and m.current("t", fresh)


def test_the_reaper_decides_each_id_when_it_gets_to_it() -> None:
    """A pass over several ids writes them one after another: an id reloaded meanwhile is decided
    on what the reload says (here: a new transaction, not timed out), not on what it was."""
    m = machine(num_partitions=1)
    ongoing(m, "a", now=T0)
    ongoing(m, "b", now=T0)
    reaping = m.timed_out(T0 + 10_001, T0 + 10_001)
    first, d = next(reaping)
    other = "b" if first == "a" else "a"
    _reload(m, 1, {first: m.get(first), other: _newer_transaction(m, other, T0 + 10_000)})  # type: ignore[dict-item]
    assert list(reaping) == []
    assert not m.current(first, d)
    meta = m.get(other)
    assert meta is not None and meta.pending is None and meta.state == TxnState.ONGOING


def test_an_expiry_decided_before_a_reload_does_not_remove_the_reactivated_id() -> None:
    m = machine(expiration=1_000)
    init(m, "idle", now=T0)
    [(tid, tombstone)] = list(m.expired(T0 + 1_001))
    _reload(m, 1, {"idle": _newer_transaction(m, "idle", T0 + 1_000)})
    m.complete("idle", tombstone)
    assert m.get("idle") is not None
    assert not m.current("idle", tombstone)


# ---- EndTxn v5 retried after a failover (issue 23 item 10) -------------------------------------
class _Logged:
    """A machine whose every written transition goes through `__transaction_state`'s encoding;
    `reloaded()` is a new coordinator that loads those records, as after a failover."""

    def __init__(self, m: TxnStateMachine) -> None:
        self.m = m
        self.log: list[tuple[str, bytes | None]] = []

    def write(self, tid: str, d: Decision) -> list[MarkerJob]:
        assert d.error == E.NONE and d.writes, d
        self.log.append((tid, None if d.remove or d.record is None else encode_value(d.record)))
        return self.m.complete(tid, d)

    def reloaded(self) -> TxnStateMachine:
        fresh = machine()
        for tid, value in self.log:
            fresh.load(tid, None if value is None else decode_value(value))
        return fresh


def _answers(m: TxnStateMachine, pid: int, epoch: int) -> list[tuple[E, int, int]]:
    """What an EndTxn v5 sent again with the epoch it had before its end bumped it gets, for
    either outcome (none of these answers writes anything)."""
    out = []
    for commit in (True, False):
        d = m.end_txn("t", pid, epoch, commit, T0 + 100, bump_epoch=True)
        assert not d.writes
        out.append((d.error, d.producer_id, d.producer_epoch))
    return out


@pytest.mark.parametrize("exhausted", [False, True], ids=["bump", "rotation"])
def test_an_end_txn_v5_retry_is_answered_alike_by_a_coordinator_that_loaded_the_log(exhausted: bool) -> None:
    logged = _Logged(machine())
    m = logged.m
    d = m.init_producer_id("t", 10_000, -1, -1, T0)
    logged.write("t", d)
    pid, epoch = d.producer_id, d.producer_epoch
    if exhausted:
        logged.write("t", m.init_producer_id("t", 10_000, -1, -1, T0))  # a record at a high epoch:
        m.get("t").producer_epoch = epoch = MAX_EPOCH - 2  # type: ignore[union-attr]
        logged.log[-1] = ("t", encode_value(m.get("t").record()))  # type: ignore[union-attr]
    logged.write("t", m.add_partitions("t", pid, epoch, [TP_A], T0 + 1))
    end = m.end_txn("t", pid, epoch, True, T0 + 2, bump_epoch=True)
    [job] = logged.write("t", end)
    expected_in_prepare = [(E.CONCURRENT_TRANSACTIONS, -1, -1), (E.INVALID_TXN_STATE, -1, -1)]
    assert _answers(m, pid, epoch) == expected_in_prepare
    assert _answers(logged.reloaded(), pid, epoch) == expected_in_prepare
    done = m.markers_written(job, T0 + 3)
    assert done is not None
    logged.write("t", done)
    expected_done = [(E.NONE, end.producer_id, end.producer_epoch), (E.INVALID_TXN_STATE, -1, -1)]
    assert _answers(m, pid, epoch) == expected_done
    assert _answers(logged.reloaded(), pid, epoch) == expected_done
    # and once the producer goes on under its new epoch, the retry is fenced by both
    logged.write("t", m.add_partitions("t", end.producer_id, end.producer_epoch, [TP_A], T0 + 4))
    fenced = [(E.PRODUCER_FENCED, -1, -1)] * 2
    assert _answers(m, pid, epoch) == fenced
    assert _answers(logged.reloaded(), pid, epoch) == fenced


def test_a_producer_fenced_by_a_timeout_stays_fenced_for_a_coordinator_that_loaded_the_log() -> None:
    """The fence takes the epoch two steps (as Kafka's transaction version 2 does: the fence, then
    the abort's own bump), so the fenced producer's EndTxn never looks like a retry of that abort."""
    logged = _Logged(machine())
    m = logged.m
    d = m.init_producer_id("t", 10_000, -1, -1, T0)
    logged.write("t", d)
    pid, epoch = d.producer_id, d.producer_epoch
    logged.write("t", m.add_partitions("t", pid, epoch, [TP_A], T0 + 1))
    [(_, fence)] = list(m.timed_out(T0 + 20_000, T0 + 20_000))
    [job] = logged.write("t", fence)
    done = m.markers_written(job, T0 + 20_001)
    assert done is not None
    logged.write("t", done)
    fenced = [(E.PRODUCER_FENCED, -1, -1)] * 2
    assert _answers(m, pid, epoch) == fenced
    assert _answers(logged.reloaded(), pid, epoch) == fenced


@pytest.mark.parametrize("before", ["empty", "complete-abort", "complete-commit"])
def test_an_epoch_bump_abort_of_a_transaction_that_added_nothing_bumps_the_epoch(before: str) -> None:
    """Transaction version 2 (EndTxn v5): a client aborts after a produce the coordinator never
    saw added (a refused produce-time check, a stalled coordinator's answer); the coordinator
    holds the id Empty or CompleteX at the client's epoch. As Kafka's, it aborts the empty
    transaction under the next epoch (nothing to mark) instead of refusing it INVALID_TXN_STATE,
    which is fatal for the client (simulation seed 4694 at 120 s: an application died of it)."""
    m = machine()
    pid, epoch = init(m)
    if before != "empty":
        assert run(m, "t", m.add_partitions("t", pid, epoch, [TP_A], T0)).error == E.NONE
        d = m.end_txn("t", pid, epoch, before == "complete-commit", T0 + 1, bump_epoch=True)
        [job] = m.complete("t", d)
        run(m, "t", m.markers_written(job, T0 + 2))  # type: ignore[arg-type]
        epoch = d.producer_epoch
    assert m.get("t").state in (TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT)  # type: ignore[union-attr]
    d = m.end_txn("t", pid, epoch, False, T0 + 3, bump_epoch=True)
    assert (d.error, d.producer_id, d.producer_epoch) == (E.NONE, pid, epoch + 1)
    assert d.record is not None and d.record.state == TxnState.PREPARE_ABORT and not d.record.partitions
    [job] = m.complete("t", d)
    assert not job.partitions and not job.commit  # nothing to mark
    run(m, "t", m.markers_written(job, T0 + 4))  # type: ignore[arg-type]
    meta = m.get("t")
    assert meta is not None and (meta.state, meta.producer_epoch) == (TxnState.COMPLETE_ABORT, epoch + 1)
    # The record reads back (the transition is a valid one when the log is loaded).
    assert decode_value(encode_value(d.record)).state == TxnState.PREPARE_ABORT
    # A commit of nothing stays refused, as Kafka's.
    assert m.end_txn("t", pid, epoch + 1, True, T0 + 5, bump_epoch=True).error == E.INVALID_TXN_STATE
