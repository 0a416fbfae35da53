"""Transactions at the wire level against a real broker: the happy path's offsets (LSO, markers,
aborted-transaction lists) and every error case with its exact Kafka code and nothing written."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers import BrokerProcess, unique_topic, wait_until
from helpers.txn import RawTxn, txn_batch

from protocol.errors import ErrorCode as E
from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic, OffsetFetchResponse
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
)
from protocol.records import decode_batches


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("txn-protocol") / "data")
    b.start()
    yield b
    b.close()


@pytest.fixture
def conn(broker: BrokerProcess) -> Iterator[RawTxn]:
    c = RawTxn(broker.port)
    yield c
    c.close()


@pytest.fixture
def topic(conn: RawTxn, request: pytest.FixtureRequest) -> str:
    name = unique_topic(request.node.name[:40])
    conn.create_topic(name, 3)
    return name


def _fetch(conn: RawTxn, topic: str, partition: int, offset: int, committed: bool):  # type: ignore[no-untyped-def]
    resp = conn.request(FetchRequest(max_wait_ms=0, min_bytes=0, isolation_level=1 if committed else 0, topics=[
        FetchTopic(topic=topic, partitions=[FetchPartition(partition=partition, fetch_offset=offset,
                                                           partition_max_bytes=1 << 20)])]), 11)
    assert isinstance(resp, FetchResponse)
    return resp.responses[0].partitions[0]


def _settled(conn: RawTxn, tid: str, state: str) -> bool:
    return conn.describe(tid).transaction_state == state


def test_open_transaction_holds_the_lso_and_commit_releases_it(conn: RawTxn, topic: str) -> None:
    tid = f"tx-{topic}"
    conn.produce(topic, 0, txn_batch(-1, -1, -1, 2, transactional=False), None)  # plain data first: offsets 0-1
    pid, epoch = conn.init_ok(tid)
    assert conn.add_partitions(tid, pid, epoch, {topic: [0, 1]}) == {(topic, 0): 0, (topic, 1): 0}
    assert conn.produce(topic, 0, txn_batch(pid, epoch, 0, 3), tid) == (0, 2)
    assert conn.produce(topic, 1, txn_batch(pid, epoch, 0, 1), tid) == (0, 0)
    assert conn.latest(topic, 0, committed=False) == 5
    assert conn.latest(topic, 0, committed=True) == 2  # the LSO: first offset of the open transaction
    [p] = conn.producers(topic, 0)
    assert (p.producer_id, p.current_txn_start_offset, p.last_sequence) == (pid, 2, 2)
    desc = conn.describe(tid)
    assert (desc.transaction_state, desc.producer_id) == ("Ongoing", pid)
    assert {(t.topic, tuple(t.partitions)) for t in desc.topics} == {(topic, (0, 1))}
    # read_committed stops at the LSO.
    assert [r.offset for _, rs in decode_batches(_fetch(conn, topic, 0, 0, True).records) for r in rs] == [0, 1]

    assert conn.end(tid, pid, epoch, True).error_code == 0
    wait_until(lambda: _settled(conn, tid, "CompleteCommit"), message="CompleteCommit")
    assert conn.latest(topic, 0, committed=True) == conn.latest(topic, 0, committed=False) == 6  # + the marker
    assert conn.latest(topic, 1, committed=True) == 2
    assert conn.producers(topic, 0)[0].current_txn_start_offset == -1
    pd = _fetch(conn, topic, 0, 0, True)
    assert pd.aborted_transactions == [] and pd.last_stable_offset == 6
    batches = list(decode_batches(pd.records))
    control = [h for h, _ in batches if h.is_control]
    assert len(control) == 1 and control[0].base_offset == 5 and control[0].producer_id == pid


def test_abort_is_listed_for_read_committed_consumers(conn: RawTxn, topic: str) -> None:
    tid = f"tx-{topic}"
    pid, epoch = conn.init_ok(tid)
    conn.add_partitions(tid, pid, epoch, {topic: [2]})
    assert conn.produce(topic, 2, txn_batch(pid, epoch, 0, 4), tid) == (0, 0)
    assert conn.end(tid, pid, epoch, False).error_code == 0
    wait_until(lambda: _settled(conn, tid, "CompleteAbort"), message="CompleteAbort")
    pd = _fetch(conn, topic, 2, 0, True)
    assert [(a.producer_id, a.first_offset) for a in pd.aborted_transactions] == [(pid, 0)]
    assert pd.last_stable_offset == 5
    assert _fetch(conn, topic, 2, 0, False).aborted_transactions is None  # read_uncommitted: no list


def test_init_producer_id_timeout_validation_and_idempotent_ids(conn: RawTxn) -> None:
    assert conn.init_pid("tx-timeout", 900_001).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert conn.describe("tx-timeout").error_code == E.TRANSACTIONAL_ID_NOT_FOUND  # nothing was created
    a, b = conn.init_pid(None), conn.init_pid(None)
    assert a.error_code == b.error_code == 0 and a.producer_id != b.producer_id


def test_sequence_errors_and_duplicates_write_nothing(conn: RawTxn, topic: str) -> None:
    tid = f"tx-{topic}"
    pid, epoch = conn.init_ok(tid)
    conn.add_partitions(tid, pid, epoch, {topic: [0]})
    assert conn.produce(topic, 0, txn_batch(pid, epoch, 0, 2), tid) == (0, 0)
    end = conn.latest(topic, 0, committed=False)
    assert conn.produce(topic, 0, txn_batch(pid, epoch, 5, 1), tid)[0] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert conn.produce(topic, 0, txn_batch(pid, epoch, 0, 2), tid) == (0, 0)  # duplicate: original offsets
    assert conn.latest(topic, 0, committed=False) == end
    assert conn.produce(topic, 0, txn_batch(pid, epoch, 2, 1), tid) == (0, 2)  # the sequence goes on


def test_fenced_producer_gets_the_kafka_errors_and_writes_nothing(conn: RawTxn, topic: str) -> None:
    tid = f"tx-{topic}"
    pid, e0 = conn.init_ok(tid)
    conn.add_partitions(tid, pid, e0, {topic: [0]})
    assert conn.produce(topic, 0, txn_batch(pid, e0, 0, 1), tid) == (0, 0)
    # A second instance: the open transaction is aborted first, then it gets a newer epoch.
    pid2, e1 = conn.init_ok(tid)
    assert pid2 == pid and e1 >= e0 + 2
    wait_until(lambda: conn.latest(topic, 0, committed=True) == conn.latest(topic, 0, committed=False),
               message="fence abort marker")
    end = conn.latest(topic, 0, committed=False)
    assert conn.produce(topic, 0, txn_batch(pid, e0, 1, 1), tid)[0] == E.INVALID_PRODUCER_EPOCH
    assert conn.add_partitions(tid, pid, e0, {topic: [1]}) == {(topic, 1): E.PRODUCER_FENCED}
    assert conn.add_partitions(tid, pid, e0, {topic: [1]}, version=1) == {(topic, 1): E.INVALID_PRODUCER_EPOCH}
    assert conn.end(tid, pid, e0, True).error_code == E.PRODUCER_FENCED
    assert conn.end(tid, pid, e0, True, version=1).error_code == E.INVALID_PRODUCER_EPOCH
    assert conn.latest(topic, 0, committed=False) == end
    # The transaction of the first instance was aborted, not committed.
    pd = _fetch(conn, topic, 0, 0, True)
    assert [(a.producer_id, a.first_offset) for a in pd.aborted_transactions] == [(pid, 0)]


def test_unknown_producer_and_missing_add_partitions(conn: RawTxn, topic: str) -> None:
    tid = f"tx-{topic}"
    end = conn.latest(topic, 0, committed=False)
    # A transactional write from a producer id the coordinator never gave out. Until the
    # coordinator's partition exists and has loaded (the test alone on a fresh broker), the write's
    # verification answers the retriable NOT_ENOUGH_REPLICAS, as Kafka maps a coordinator not yet
    # available for a produce; a client retries it, and so does this test.
    conn.request(FindCoordinatorRequest(key=tid, key_type=1), 3)  # as a client would: creates __transaction_state

    def refused() -> int:
        code = conn.produce(topic, 0, txn_batch(987654, 0, 0, 1), tid)[0]
        return 0 if code == E.NOT_ENOUGH_REPLICAS else code

    assert wait_until(refused, timeout=30, message="the verification answered") == E.INVALID_TXN_STATE
    assert conn.add_partitions("tx-ghost", 987654, 0, {topic: [0]}) == {(topic, 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert conn.end("tx-ghost", 987654, 0, True).error_code == E.INVALID_PRODUCER_ID_MAPPING
    pid, epoch = conn.init_ok(tid)
    assert conn.end(tid, pid + 1, epoch, True).error_code == E.INVALID_PRODUCER_ID_MAPPING
    # EndTxn with no partition ever added: no transaction to end.
    assert conn.end(tid, pid, epoch, True).error_code == E.INVALID_TXN_STATE
    assert conn.end(tid, pid, epoch, False).error_code == E.INVALID_TXN_STATE
    # A zombie write: a partition that is not part of the ongoing transaction.
    conn.add_partitions(tid, pid, epoch, {topic: [1]})
    assert conn.produce(topic, 0, txn_batch(pid, epoch, 0, 1), tid)[0] == E.INVALID_TXN_STATE
    # A client that knows TRANSACTION_ABORTABLE (Produce v11, KIP-1050) is told it.
    assert conn.produce(topic, 0, txn_batch(pid, epoch, 0, 1), tid, version=11)[0] == E.TRANSACTION_ABORTABLE
    assert conn.latest(topic, 0, committed=False) == end
    assert conn.producers(topic, 0) == []
    assert conn.describe(tid).transaction_state == "Ongoing"


def test_add_partitions_with_an_unknown_partition_adds_nothing(conn: RawTxn, topic: str) -> None:
    tid = f"tx-{topic}"
    pid, epoch = conn.init_ok(tid)
    got = conn.add_partitions(tid, pid, epoch, {topic: [0, 7]})
    assert got == {(topic, 0): E.OPERATION_NOT_ATTEMPTED, (topic, 7): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert conn.describe(tid).transaction_state == "Empty"


def test_late_produce_after_the_transaction_ended_is_refused(conn: RawTxn, topic: str) -> None:
    tid = f"tx-{topic}"
    pid, epoch = conn.init_ok(tid)
    conn.add_partitions(tid, pid, epoch, {topic: [0]})
    assert conn.produce(topic, 0, txn_batch(pid, epoch, 0, 1), tid)[0] == 0
    assert conn.end(tid, pid, epoch, True).error_code == 0
    wait_until(lambda: _settled(conn, tid, "CompleteCommit"), message="commit")
    end = conn.latest(topic, 0, committed=False)
    # Same epoch, next sequence, but its transaction is over: a zombie, not a new transaction.
    assert conn.produce(topic, 0, txn_batch(pid, epoch, 1, 1), tid)[0] == E.INVALID_TXN_STATE
    assert conn.produce(topic, 0, txn_batch(pid, epoch, 1, 1), tid, version=11)[0] == E.TRANSACTION_ABORTABLE
    assert conn.latest(topic, 0, committed=False) == end


def test_add_partitions_pipelined_behind_end_txn_waits_for_completion(conn: RawTxn, topic: str) -> None:
    tid = f"tx-{topic}"
    pid, epoch = conn.init_ok(tid)
    conn.add_partitions(tid, pid, epoch, {topic: [0]})
    conn.send(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True), 3)
    from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnTopic
    conn.send(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=[2])]), 3)
    _, end = conn.receive(EndTxnRequest, 3)
    _, add = conn.receive(AddPartitionsToTxnRequest, 3)
    assert isinstance(end, EndTxnResponse) and end.error_code == 0
    assert isinstance(add, AddPartitionsToTxnResponse)
    assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    desc = conn.describe(tid)
    assert desc.transaction_state == "Ongoing" and [(t.topic, t.partitions) for t in desc.topics] == [(topic, [2])]
    assert conn.latest(topic, 0, committed=True) == conn.latest(topic, 0, committed=False)  # first one done


def test_end_txn_v5_bumps_the_epoch_and_a_late_end_txn_cannot_end_the_next(conn: RawTxn, topic: str) -> None:
    tid = f"tx-{topic}"
    pid, e0 = conn.init_ok(tid)
    conn.add_partitions(tid, pid, e0, {topic: [0]})
    conn.produce(topic, 0, txn_batch(pid, e0, 0, 1), tid)
    r = conn.end(tid, pid, e0, True, version=5)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, e0 + 1)
    wait_until(lambda: _settled(conn, tid, "CompleteCommit"), message="commit")
    # The retry of that EndTxn is answered the same way.
    r = conn.end(tid, pid, e0, True, version=5)
    assert (r.error_code, r.producer_epoch) == (0, e0 + 1)
    # The next transaction runs under the new epoch; sequences restart at 0.
    conn.add_partitions(tid, pid, e0 + 1, {topic: [0]}, version=3)
    assert conn.produce(topic, 0, txn_batch(pid, e0 + 1, 0, 1), tid)[0] == 0
    # A delayed write of the old epoch is fenced at the partition ...
    assert conn.produce(topic, 0, txn_batch(pid, e0, 1, 1), tid)[0] == E.INVALID_PRODUCER_EPOCH
    # ... and a delayed EndTxn of the old transaction cannot end this one.
    assert conn.end(tid, pid, e0, False, version=5).error_code == E.PRODUCER_FENCED
    assert conn.describe(tid).transaction_state == "Ongoing"
    r = conn.end(tid, pid, e0 + 1, False, version=5)
    assert (r.error_code, r.producer_epoch) == (0, e0 + 2)


def test_aborted_transactions_are_listed_when_the_fetch_spans_segments(broker: BrokerProcess, conn: RawTxn) -> None:
    topic = unique_topic("txn-segments")
    conn.create_topic(topic, 1, {"segment.bytes": "600"})  # a few batches per segment
    tid = f"tx-{topic}"
    pid, epoch = conn.init_ok(tid)
    conn.add_partitions(tid, pid, epoch, {topic: [0]})
    for seq in range(0, 12, 2):  # 6 batches of 2 records: the transaction spans several segments
        assert conn.produce(topic, 0, txn_batch(pid, epoch, seq, 2, value=b"x" * 60), tid)[0] == 0
    assert conn.end(tid, pid, epoch, False).error_code == 0
    wait_until(lambda: _settled(conn, tid, "CompleteAbort"), message="abort")
    conn.produce(topic, 0, txn_batch(-1, -1, -1, 1, transactional=False), None)  # offset 13, after the marker
    assert len(list((broker.data_dir / f"{topic}-0").glob("*.log"))) >= 3
    # Fetches starting in the first, a middle and the marker's segment all learn of the abort.
    for start in (0, 7, 12):
        pd = _fetch(conn, topic, 0, start, True)
        assert pd.records, start
        assert [(a.producer_id, a.first_offset) for a in pd.aborted_transactions] == [(pid, 0)], start
    # Past the transaction nothing is listed.
    assert _fetch(conn, topic, 0, 13, True).aborted_transactions == []


def test_clients_cannot_write_to_the_coordinators_log(conn: RawTxn) -> None:
    conn.init_ok("tx-makes-the-state-topic")  # the log exists whichever test of the module runs first
    end = conn.latest("__transaction_state", 0, committed=False)
    err, _ = conn.produce("__transaction_state", 0, txn_batch(-1, -1, -1, 1, transactional=False), None)
    assert err == E.INVALID_TOPIC_EXCEPTION
    assert conn.latest("__transaction_state", 0, committed=False) == end


def _txn_commit_offset(conn: RawTxn, tid: str, pid: int, epoch: int, group: str, topic: str, offset: int,
                       version: int = 3) -> int:
    resp = conn.request(TxnOffsetCommitRequest(
        transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch, topics=[
            TxnOffsetCommitRequestTopic(name=topic, partitions=[TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=offset, committed_metadata="m")])]), version)
    assert isinstance(resp, TxnOffsetCommitResponse)
    return resp.topics[0].partitions[0].error_code


def _fetch_offset(conn: RawTxn, group: str, topic: str, require_stable: bool) -> tuple[int, int]:
    resp = conn.request(OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequestTopic(
        name=topic, partition_indexes=[0])], require_stable=require_stable), 7)
    assert isinstance(resp, OffsetFetchResponse)
    p = resp.topics[0].partitions[0]
    return p.error_code, p.committed_offset


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_transactional_offsets_are_pending_until_the_marker(conn: RawTxn, topic: str, commit: bool) -> None:
    tid, group = f"tx-{topic}", f"g-{topic}"
    pid, epoch = conn.init_ok(tid)
    # TxnOffsetCommit before AddOffsetsToTxn: the offsets partition is not in the transaction.
    assert _txn_commit_offset(conn, tid, pid, epoch, group, topic, 3) == E.INVALID_TXN_STATE
    # A client that knows TRANSACTION_ABORTABLE (v4, KIP-1050) is told it: for Java's producer,
    # as for ours, INVALID_TXN_STATE on a TxnOffsetCommit is fatal (simulation seed 3975).
    assert _txn_commit_offset(conn, tid, pid, epoch, group, topic, 3, version=4) == E.TRANSACTION_ABORTABLE
    assert conn.add_offsets(tid, pid, epoch, group) == 0
    assert _txn_commit_offset(conn, tid, pid, epoch, group, topic, 3) == 0
    assert _fetch_offset(conn, group, topic, require_stable=True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert _fetch_offset(conn, group, topic, require_stable=False) == (0, -1)  # not visible yet
    assert conn.end(tid, pid, epoch, commit).error_code == 0
    wait_until(lambda: _fetch_offset(conn, group, topic, require_stable=True)[0] == 0, message="marker applied")
    assert _fetch_offset(conn, group, topic, require_stable=True) == (0, 3 if commit else -1)
    # A fenced producer cannot commit offsets any more.
    pid2, e2 = conn.init_ok(tid)
    assert _txn_commit_offset(conn, tid, pid, epoch, group, topic, 9) == E.PRODUCER_FENCED
    assert _txn_commit_offset(conn, tid, pid, epoch, group, topic, 9, version=2) == E.INVALID_PRODUCER_EPOCH
    assert _fetch_offset(conn, group, topic, require_stable=True) == (0, 3 if commit else -1)
