"""Producer state: idempotence, epochs, transactions, the LSO and the aborted-transaction index."""

from __future__ import annotations

from pathlib import Path

import pytest
from _batches import idem, make_batch, make_marker

from protocol.batch import iter_batches
from protocol.errors import ErrorCode, KafkaError
from storage import AbortedTransaction, CompletedTxn, LogConfig, PartitionLog

INT32_MAX = 2**31 - 1


def open_log(path: Path, **kw: object) -> PartitionLog:
    return PartitionLog.open(path, LogConfig(**kw))  # type: ignore[arg-type]


def code_of(log: PartitionLog, batch: bytes) -> ErrorCode:
    end = log.log_end_offset
    with pytest.raises(KafkaError) as e:
        log.append(batch, leader_epoch=0)
    assert log.log_end_offset == end  # nothing written
    return e.value.code


def txn(seq: int, count: int = 1, *, pid: int = 9, epoch: int = 0) -> bytes:
    return make_batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)


def test_duplicates_answered_with_original_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(make_batch(3), leader_epoch=0)  # offsets 0-2, no producer
    firsts = [log.append(idem(i * 5, 5), leader_epoch=0).first_offset for i in range(6)]
    assert firsts == [3, 8, 13, 18, 23, 28]
    end = log.log_end_offset
    for i in range(1, 6):  # the last five batches are remembered
        r = log.append(idem(i * 5, 5), leader_epoch=0)
        assert r.duplicate and (r.first_offset, r.last_offset) == (firsts[i], firsts[i] + 4)
    assert log.log_end_offset == end
    # the sixth-newest is forgotten: its retry is out of order, not a duplicate
    assert code_of(log, idem(0, 5)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_sequence_rules(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    # an unknown producer is accepted at any sequence (KIP-360 behaviour)
    log.append(idem(42, 2), leader_epoch=0)
    assert code_of(log, idem(45)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # gap
    assert code_of(log, idem(43)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # overlap, not a duplicate
    log.append(idem(44), leader_epoch=0)
    # a new epoch must start at 0
    assert code_of(log, idem(45, epoch=1)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    log.append(idem(0, epoch=1), leader_epoch=0)
    # an older epoch is fenced
    assert code_of(log, idem(45, epoch=0)) == ErrorCode.INVALID_PRODUCER_EPOCH
    entry = log.producer_state.get(7)
    assert entry is not None and (entry.epoch, entry.last_seq) == (1, 0)


def test_sequence_wraps_after_int32_max(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(idem(INT32_MAX - 1, 2), leader_epoch=0)  # sequences MAX-1, MAX
    log.append(idem(0, 3), leader_epoch=0)
    assert log.producer_state.get(7).last_seq == 2  # type: ignore[union-attr]
    # a batch that wraps inside itself: last sequence is taken modulo 2^31
    log2 = open_log(tmp_path / "u-0")
    log2.append(idem(INT32_MAX - 1, 4), leader_epoch=0)
    assert log2.producer_state.get(7).last_seq == 1  # type: ignore[union-attr]
    assert log2.append(idem(INT32_MAX - 1, 4), leader_epoch=0).duplicate
    log2.append(idem(2), leader_epoch=0)


def test_append_is_all_or_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(idem(0), leader_epoch=0)
    with pytest.raises(KafkaError):
        log.append(idem(1) + idem(3), leader_epoch=0)  # second batch has a gap
    assert log.log_end_offset == 1
    assert log.producer_state.get(7).last_seq == 0  # type: ignore[union-attr]
    r = log.append(idem(1) + idem(2, 2) + make_batch(1), leader_epoch=0)
    assert (r.first_offset, r.last_offset) == (1, 4)
    assert log.producer_state.get(7).last_seq == 3  # type: ignore[union-attr]
    with pytest.raises(KafkaError) as e:
        log.append(idem(2, 2) + idem(4), leader_epoch=0)  # a retry glued to a new batch
    assert e.value.code == ErrorCode.INVALID_RECORD


def test_transaction_holds_lso_until_marker(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(make_batch(2), leader_epoch=0)  # 0-1
    log.append(txn(0, 2), leader_epoch=0)  # 2-3, opens a transaction at 2
    log.append(make_batch(1), leader_epoch=0)  # 4
    log.append(txn(2, 1), leader_epoch=0)  # 5
    log.high_watermark = log.log_end_offset
    assert log.high_watermark == 6 and log.last_stable_offset == 2
    assert log.producer_state.ongoing_transactions == {9: 2}
    # read_committed stops before the open transaction's first batch
    out = log.read(0, 1 << 20, upper_bound=log.last_stable_offset)
    assert [h.base_offset for _, h in iter_batches(out.data)] == [0]
    # a non-transactional write inside the transaction is refused
    with pytest.raises(KafkaError) as e:
        log.append(idem(3, pid=9), leader_epoch=0)
    assert e.value.code == ErrorCode.INVALID_TXN_STATE
    r = log.append(make_marker(9, 0, abort=False, coordinator_epoch=1), leader_epoch=0)
    assert r.completed_txns == (CompletedTxn(9, 2, 6, False),)
    assert log.last_stable_offset == 2  # until the marker is below the high watermark
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 7
    assert log.aborted_transactions(0, 7) == []
    # the next transaction of the same producer continues its sequence
    log.append(txn(3, 1), leader_epoch=0)
    assert log.producer_state.ongoing_transactions == {9: 7}


def test_abort_goes_to_txn_index_across_segments(tmp_path: Path) -> None:
    one = len(txn(0, 2))
    log = open_log(tmp_path / "t-0", segment_bytes=one * 2)
    log.append(txn(0, 2, pid=1), leader_epoch=0)  # 0-1   pid 1 opens at 0
    log.append(txn(0, 2, pid=2), leader_epoch=0)  # 2-3   pid 2 opens at 2
    log.append(make_batch(2), leader_epoch=0)  # 4-5  (new segment)
    log.append(txn(2, 2, pid=1), leader_epoch=0)  # 6-7
    log.append(make_batch(2), leader_epoch=0)  # 8-9  (new segment)
    r = log.append(make_marker(1, 0, abort=True), leader_epoch=0)  # 10
    assert r.completed_txns == (CompletedTxn(1, 0, 10, True),)
    log.append(make_marker(2, 0, abort=True), leader_epoch=0)  # 11
    assert len(log.segment_base_offsets) >= 3
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 12
    assert log.aborted_transactions(0, 12) == [AbortedTransaction(1, 0), AbortedTransaction(2, 2)]
    assert log.aborted_transactions(4, 6) == [AbortedTransaction(1, 0), AbortedTransaction(2, 2)]
    assert log.aborted_transactions(0, 2) == [AbortedTransaction(1, 0)]
    assert log.aborted_transactions(12, 20) == []
    out = log.read(4, 1 << 20, include_aborted=True)
    assert out.aborted_transactions == [AbortedTransaction(1, 0), AbortedTransaction(2, 2)]
    txn_files = sorted((tmp_path / "t-0").glob("*.txnindex"))
    assert sum(f.stat().st_size for f in txn_files) == 2 * 34
    # the index survives a restart, and recovery rebuilds it identically after a crash
    log.close()
    log = open_log(tmp_path / "t-0", segment_bytes=one * 2)
    assert log.aborted_transactions(0, 12) == [AbortedTransaction(1, 0), AbortedTransaction(2, 2)]
    (tmp_path / "t-0" / "recovery-point-offset-checkpoint").unlink()
    log.close()
    log = open_log(tmp_path / "t-0", segment_bytes=one * 2)
    assert log.recovery_stats.batches_validated == 7
    assert log.aborted_transactions(0, 12) == [AbortedTransaction(1, 0), AbortedTransaction(2, 2)]
    assert sum(f.stat().st_size for f in txn_files) == 2 * 34


def test_marker_fencing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(txn(0, pid=5, epoch=2), leader_epoch=0)
    log.append(make_marker(5, 2, abort=False, coordinator_epoch=4), leader_epoch=0)
    log.append(txn(1, pid=5, epoch=2), leader_epoch=0)
    assert code_of(log, make_marker(5, 2, abort=True, coordinator_epoch=3)) == \
        ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert code_of(log, make_marker(5, 1, abort=True, coordinator_epoch=4)) == ErrorCode.INVALID_PRODUCER_EPOCH
    # the coordinator fences the producer by aborting with a bumped epoch
    r = log.append(make_marker(5, 3, abort=True, coordinator_epoch=4), leader_epoch=0)
    assert r.completed_txns == (CompletedTxn(5, 2, 3, True),)
    assert code_of(log, txn(2, pid=5, epoch=2)) == ErrorCode.INVALID_PRODUCER_EPOCH
    # a marker for a producer with nothing open completes nothing
    assert log.append(make_marker(6, 0, abort=True), leader_epoch=0).completed_txns == ()


def test_high_watermark_holds_back_completed_abort(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(txn(0, 3), leader_epoch=0)
    log.high_watermark = 3
    assert log.last_stable_offset == 0
    log.append(make_marker(9, 0, abort=True), leader_epoch=0)
    assert log.last_stable_offset == 0  # marker at 3 not replicated yet
    log.high_watermark = 4
    assert log.last_stable_offset == 4


def test_state_after_restart_and_truncation(tmp_path: Path) -> None:
    one = len(txn(0, 2))
    cfg = dict(segment_bytes=one * 3)
    log = open_log(tmp_path / "t-0", **cfg)
    log.append(idem(0, 2, pid=1), leader_epoch=0)  # 0-1
    log.append(txn(0, 2, pid=2), leader_epoch=0)  # 2-3  open at 2
    log.append(idem(2, 2, pid=1), leader_epoch=0)  # 4-5
    log.append(make_marker(2, 0, abort=True), leader_epoch=0)  # 6
    log.append(txn(2, 2, pid=2), leader_epoch=0)  # 7-8  open at 7
    log.append(idem(4, 2, pid=1), leader_epoch=0)  # 9-10
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 7
    log.close()
    log = open_log(tmp_path / "t-0", **cfg)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 7
    assert log.producer_state.get(1).last_seq == 5  # type: ignore[union-attr]
    # a follower truncating back to before the second transaction forgets it
    log.truncate_to(7)
    assert log.producer_state.ongoing_transactions == {}
    assert log.producer_state.get(1).last_seq == 3  # type: ignore[union-attr]
    assert log.last_stable_offset == 7
    assert log.aborted_transactions(0, 7) == [AbortedTransaction(2, 2)]
    log.truncate_to(5)  # drops the marker: the first transaction is open again
    assert log.producer_state.ongoing_transactions == {2: 2}
    assert log.aborted_transactions(0, 5) == []


def test_producer_expiry(tmp_path: Path) -> None:
    now = [1_000_000]
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(producer_id_expiration_ms=1000), now_ms=lambda: now[0])
    log.append(idem(0, pid=1, timestamp=5), leader_epoch=0)  # old record timestamps do not matter
    log.append(txn(0, pid=2), leader_epoch=0)
    now[0] += 999
    assert log.expire_producers() == 0
    now[0] += 1
    assert log.expire_producers() == 1
    assert set(log.producer_state.active_producers) == {2}  # the open transaction keeps pid 2
    log.append(idem(17, pid=1), leader_epoch=0)  # back after expiry: accepted, tracked again


def test_a_checkpoint_snapshots_producer_state_so_a_truncation_replays_only_from_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a roll, a follower's truncation used to replay the whole log (on the event loop)."""
    import storage.log as storage_log

    log = open_log(tmp_path / "t-0")
    for i in range(10):
        log.append(idem(i * 2, 2, pid=1), leader_epoch=0)  # 0-19
    log.checkpoint()
    assert log.producer_state.snapshot_offsets() == [20]
    for i in range(10, 15):
        log.append(idem(i * 2, 2, pid=1), leader_epoch=0)  # 20-29
    starts: list[int] = []
    real = storage_log.replay

    def spy(producers, segments, start, end, hw, now_ms):  # type: ignore[no-untyped-def]
        starts.append(start)
        return real(producers, segments, start, end, hw, now_ms)

    monkeypatch.setattr(storage_log, "replay", spy)
    log.truncate_to(26)
    assert starts == [20]
    assert log.producer_state.get(1).last_seq == 25  # type: ignore[union-attr]
    log.append(idem(26, 2, pid=1), leader_epoch=0)  # the sequence goes on from the truncation point
    assert code_of(log, idem(30, 1, pid=1)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_periodic_snapshots_keep_the_newest_few_and_one_recovery_can_use(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(idem(0, 2, pid=1), leader_epoch=0)
    log.flush()  # the recovery point is 2 from here on
    log.checkpoint()
    for i in range(1, 6):
        log.append(idem(i * 2, 2, pid=1), leader_epoch=0)
        log.checkpoint()
    log.checkpoint()  # nothing appended since the last: no new snapshot
    assert log.producer_state.snapshot_offsets() == [2, 8, 10, 12]
