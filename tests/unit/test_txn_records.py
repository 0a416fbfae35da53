"""`__transaction_state` record layout, Kafka's partitioning rule, and the marker bookkeeping."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.partitioning import java_string_hash, partition_for
from broker.txn.log_records import TxnLogFormatError, decode_key, decode_value, encode_key, encode_value
from broker.txn.machine import MarkerJob
from broker.txn.markers import DELETED, MarkerQueue, build_request, response_errors
from broker.txn.state import TxnRecord, TxnState
from protocol.errors import ErrorCode as E
from protocol.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)

# Kafka's value keeps no last producer epoch (-1 after a load) and no partitions in Empty.
records = st.builds(
    TxnRecord,
    producer_id=st.integers(-1, 2**63 - 1), producer_epoch=st.integers(-1, 2**15 - 1),
    last_producer_id=st.integers(-1, 2**63 - 1), last_producer_epoch=st.just(-1),
    next_producer_id=st.integers(-1, 2**63 - 1), timeout_ms=st.integers(1, 2**31 - 1),
    state=st.sampled_from([s for s in TxnState
                           if s not in (TxnState.EMPTY, TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE)]),
    partitions=st.frozensets(st.tuples(st.text(min_size=1, max_size=20), st.integers(0, 2**31 - 1)), max_size=8),
    start_ms=st.integers(-1, 2**62), update_ms=st.integers(-1, 2**62),
    next_producer_epoch=st.integers(-1, 2**15 - 1),
)


@given(records)
def test_value_round_trips(rec: TxnRecord) -> None:
    assert decode_value(encode_value(rec)) == rec


@given(st.text(max_size=100))
def test_key_round_trips(tid: str) -> None:
    assert decode_key(encode_key(tid)) == tid


def test_version_comes_first_and_unknown_versions_are_refused() -> None:
    rec = TxnRecord(1, 2, -1, -1, -1, 60_000, TxnState.ONGOING, frozenset({("t", 0)}), 5, 6)
    data = encode_value(rec)
    assert data[:2] == b"\x00\x00" and encode_key("x")[:2] == b"\x00\x00"
    with pytest.raises(TxnLogFormatError):
        decode_value(b"\x00\x02" + data[2:])
    with pytest.raises(TxnLogFormatError):
        decode_value(data + b"\x00")  # trailing bytes are damage, not slack
    with pytest.raises(TxnLogFormatError):
        decode_key(b"\x00\x07\x00\x01x")


def test_a_prepared_transaction_taken_over_keeps_both_identities_and_its_2pc_timeout() -> None:
    """KIP-939: a transaction kept by a new instance (KeepPreparedTxn) is written with the ongoing
    transaction's producer id and epoch, the new instance's epoch in NextProducerEpoch (tag 3,
    flexible version 1), and the 2PC timeout (Kafka's Int.MaxValue), so a coordinator that loads
    it knows both and never times it out."""
    rec = TxnRecord(7, 3, -1, -1, 7, 2**31 - 1, TxnState.ONGOING, frozenset({("t", 0)}), 5, 6, next_producer_epoch=4)
    data = encode_value(rec)
    assert data[:2] == b"\x00\x01"
    assert decode_value(data) == rec


def test_java_hash_and_kafka_partition_rule() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("\U0001F600") == java_string_hash("\ud83d\ude00".encode("utf-16", "surrogatepass")
                                                               .decode("utf-16"))
    # Its hashCode is Integer.MIN_VALUE: Kafka's Utils.abs maps that to 0.
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    assert java_string_hash("my-transactional-id") < 0  # a negative hash: Math.abs, not a mask
    assert partition_for("my-transactional-id", 50) == abs(java_string_hash("my-transactional-id")) % 50


def _job(tid: str, parts: set[tuple[str, int]], commit: bool = True, pid: int = 7) -> MarkerJob:
    return MarkerJob(tid, pid, 3, commit, 0, frozenset(parts))


def test_marker_queue_batches_per_broker_and_completes_only_when_all_written() -> None:
    q = MarkerQueue(retry_backoff_ms=100)
    q.add(_job("a", {("x", 0), ("x", 1)}, pid=1))
    q.add(_job("b", {("y", 0)}, pid=2))
    leaders = {("x", 0): 1, ("x", 1): 2, ("y", 0): 1}
    sends = q.drain(0, leaders.__getitem__)
    assert sorted(sends) == [1, 2]
    assert {s.key[0] for s in sends[1]} == {"a", "b"}  # two transactions, one request to broker 1
    assert q.drain(0, leaders.__getitem__) == {}  # everything is in flight
    q.on_response(sends[1], {(1, "x", 0): E.NONE, (2, "y", 0): E.NONE}, 10)
    assert [j.transactional_id for j in q.take_done()] == ["b"]
    q.on_response(sends[2], {(1, "x", 1): E.NOT_LEADER_OR_FOLLOWER}, 10)
    assert q.take_done() == []
    assert q.drain(50, leaders.__getitem__) == {}  # backing off
    assert q.next_retry_ms() == 110
    retry = q.drain(110, leaders.__getitem__)
    assert [s.partitions for s in retry[2]] == [(("x", 1),)]
    q.on_response(retry[2], {(1, "x", 1): E.NONE}, 120)
    assert [j.transactional_id for j in q.take_done()] == ["a"]
    assert len(q) == 0


def test_marker_queue_failure_retries_deleted_topics_count_as_done_and_fencing_abandons() -> None:
    q = MarkerQueue(retry_backoff_ms=10)
    q.add(_job("a", {("x", 0), ("gone", 0)}))
    leaders = {("x", 0): 1, ("gone", 0): DELETED}
    sends = q.drain(0, leaders.__getitem__)
    assert [s.partitions for s in sends[1]] == [(("x", 0),)]
    q.on_failure(sends[1], 0)
    again = q.drain(10, leaders.__getitem__)
    q.on_response(again[1], {(7, "x", 0): E.NONE}, 11)
    assert [j.transactional_id for j in q.take_done()] == ["a"]

    q.add(_job("f", {("x", 0)}))
    s = q.drain(20, leaders.__getitem__)
    q.on_response(s[1], {(7, "x", 0): E.TRANSACTION_COORDINATOR_FENCED}, 21)
    assert q.take_done() == [] and len(q) == 0  # a newer coordinator finishes it, not us
    assert [(j.transactional_id, why) for j, why in q.take_abandoned()] == [("f", E.TRANSACTION_COORDINATOR_FENCED)]

    q.add(_job("e", set()))  # nothing to mark: done at once
    assert [j.transactional_id for j in q.take_done()] == ["e"]


def test_marker_request_and_response_mapping() -> None:
    q = MarkerQueue()
    q.add(_job("a", {("x", 0), ("x", 2), ("y", 1)}, commit=False))
    sends = q.drain(0, lambda tp: 1)[1]
    req = build_request(sends)
    [m] = req.markers
    assert (m.producer_id, m.producer_epoch, m.transaction_result) == (7, 3, False)
    assert {t.name: t.partition_indexes for t in m.topics} == {"x": [0, 2], "y": [1]}
    resp = WriteTxnMarkersResponse(markers=[WritableTxnMarkerResult(producer_id=7, topics=[
        WritableTxnMarkerTopicResult(name="x", partitions=[
            WritableTxnMarkerPartitionResult(partition_index=0, error_code=0),
            WritableTxnMarkerPartitionResult(partition_index=2, error_code=E.INVALID_PRODUCER_EPOCH)])])])
    errors = response_errors(resp)
    assert errors == {(7, "x", 0): 0, (7, "x", 2): E.INVALID_PRODUCER_EPOCH}
    q.on_response(sends, errors, 1)
    # x-2 saw a newer epoch of the producer: as in Kafka, the job is given up (not completed, not
    # retried — y-1, missing from the answer, is not sent again either).
    assert q.take_done() == [] and len(q) == 0
    assert q.drain(10_000, lambda tp: 1) == {}
    assert [(j.transactional_id, why) for j, why in q.take_abandoned()] == [("a", E.INVALID_PRODUCER_EPOCH)]


def test_a_marker_refused_for_an_old_epoch_never_completes_the_transaction() -> None:
    """Issue 11, item 5: INVALID_PRODUCER_EPOCH from one partition used to count as written, so
    CompleteCommit was written over a partition that never took the marker."""
    q = MarkerQueue()
    q.add(_job("t", {("x", 0), ("x", 1)}))
    sends = q.drain(0, lambda tp: 1)[1]
    q.on_response(sends, {(7, "x", 0): E.NONE, (7, "x", 1): E.INVALID_PRODUCER_EPOCH}, 1)
    assert q.take_done() == []
    [(job, why)] = q.take_abandoned()
    assert job.transactional_id == "t" and why == E.INVALID_PRODUCER_EPOCH


def test_partitions_that_cannot_hold_the_data_count_as_marked() -> None:
    q = MarkerQueue()
    q.add(_job("u", {("x", 0), ("x", 1)}))
    sends = q.drain(0, lambda tp: 1)[1]
    q.on_response(sends, {(7, "x", 0): E.NONE, (7, "x", 1): E.UNSUPPORTED_FOR_MESSAGE_FORMAT}, 1)
    assert [j.transactional_id for j in q.take_done()] == ["u"]


def test_marker_queue_drop_forgets_jobs_of_a_partition_that_moved_and_ignores_their_late_answers() -> None:
    q = MarkerQueue(retry_backoff_ms=10)
    q.add(_job("moved", {("x", 0)}, pid=1))
    q.add(_job("stays", {("x", 0)}, pid=2))
    sends = q.drain(0, {("x", 0): 1}.__getitem__)
    assert q.drop(lambda job: job.transactional_id == "moved") == 1
    assert len(q) == 1
    # The request that was in flight when the partition moved is answered after the drop.
    q.on_response(sends[1], {(1, "x", 0): E.NONE, (2, "x", 0): E.NONE}, 5)
    assert [j.transactional_id for j in q.take_done()] == ["stays"]  # never "moved": not ours now
    assert q.take_abandoned() == [] and len(q) == 0


def test_a_late_answer_to_a_previous_load_s_markers_leaves_the_reloaded_job_alone() -> None:
    """Simulation seed 7 (`--faults flip`; seed 20 with the fault as committed):
    `__transaction_state-0` moved away and back while a WriteTxnMarkers of the coordinator's
    epoch 7 was held on a cut link. The reload under epoch 9 resent the same markers (same
    transactional id, producer, epoch, result); the held request was answered
    TRANSACTION_COORDINATOR_FENCED (the partition had seen epoch 8 since), and that answer
    abandoned the epoch-9 job: the transaction stayed PrepareCommit for good, its offsets
    pending. An answer belongs to the job of the coordinator epoch that sent it."""
    q = MarkerQueue(retry_backoff_ms=10)
    old = MarkerJob("t", 7, 3, True, 7, frozenset({("x", 0)}))
    q.add(old)
    held = q.drain(0, lambda tp: 1)[1]
    assert q.drop(lambda job: True) == 1  # unloaded: the partition moved away
    q.add(dataclasses.replace(old, coordinator_epoch=9))  # loaded again, the transaction found prepared
    resent = q.drain(1, lambda tp: 1)[1]
    assert [s.coordinator_epoch for s in resent] == [9]
    q.on_response(held, {(7, "x", 0): E.TRANSACTION_COORDINATOR_FENCED}, 2)
    assert q.take_abandoned() == [] and len(q) == 1
    q.on_failure(held, 3)  # nor does a late failure of it put the resent marker back to wait
    assert q.drain(4, lambda tp: 1) == {}  # still in flight: sent once
    q.on_response(resent, {(7, "x", 0): E.NONE}, 5)
    assert [j.coordinator_epoch for j in q.take_done()] == [9]
