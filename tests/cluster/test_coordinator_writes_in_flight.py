"""Coordinator writes in flight: one outlives the request that asked for it, and a transaction's
marker that lands while its offsets replicate still settles them.

The server cancels the handlers of a connection that closes. A transaction coordinator whose
handler was cancelled between appending a transition to `__transaction_state` and learning its
outcome kept the transition pending for good: the id answered CONCURRENT_TRANSACTIONS to every
later InitProducerId and its transaction never timed out (found by the chaos campaign as copiers
that hung in init_transactions after a network fault). Three real brokers: the coordinator's
peers are paused so the append waits for them, the client goes away meanwhile, the peers come back.
"""

from __future__ import annotations

from pathlib import Path

from helpers.cluster import Cluster
from helpers.cluster_metadata import SHORT_SESSION, coordinator, listed_everywhere, new_topic, voters_for
from helpers.raw import Raw
from helpers.txn import RawTxn, create_topic_at, offset_at

from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
)
from protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from protocol.schema import Message

TID = "cancelled-mid-write"
NOT_COORDINATOR = 16
UNSTABLE_OFFSET_COMMIT = 88


def _log_bytes(c: Cluster, node: int, topic: str) -> int:
    return sum(f.stat().st_size for f in Path(c[node].data_dir).glob(f"{topic}-*/*.log"))


def _sent_and_left(c: Cluster, node: int, request: Message, version: int, topic: str) -> None:
    """Send `request` to the coordinator at `node` while its peers are paused (its append to
    `topic` then waits for followers that do not fetch), and close the connection once the
    append is on disk, so the handler is cancelled mid-write; then let the peers go on."""
    peers = [n for n in c.node_ids if n != node]
    for n in peers:
        c.pause(n)
    try:
        before = _log_bytes(c, node, topic)
        leaving = RawTxn(c.ports[node])
        leaving.send(request, version)
        c.wait_until(lambda: _log_bytes(c, node, topic) > before, timeout=10, message=f"the append to {topic}")
        leaving.close()
    finally:
        for n in peers:
            c.resume(n)


def test_an_init_producer_id_whose_client_left_mid_write_does_not_wedge_the_id(cluster: Cluster) -> None:
    c = cluster
    # FindCoordinator creates __transaction_state; the id's coordinator is whichever broker leads
    # its partition (InitProducerId sent to another broker is NOT_COORDINATOR)
    c.wait_until(lambda: coordinator(c.ports[1], TID, 1) in c.node_ids, timeout=30, message="__transaction_state")
    node = coordinator(c.ports[1], TID, 1)
    first = RawTxn(c.ports[node])
    try:
        first.init_ok(TID)  # the id
    finally:
        first.close()
    _sent_and_left(c, node, InitProducerIdRequest(transactional_id=TID, transaction_timeout_ms=60_000), 4,
                   "__transaction_state")

    again = RawTxn(c.ports[node])
    try:
        pid, epoch = again.init_ok(TID)  # CONCURRENT_TRANSACTIONS for ever before the fix
        assert pid >= 0 and epoch >= 1
    finally:
        again.close()


def test_an_offset_commit_whose_client_left_mid_write_is_still_applied(cluster: Cluster) -> None:
    """The group coordinator's side: offsets appended while the client went away must be what
    OffsetFetch answers once they are replicated, as they are what a reload would find."""
    c = cluster
    group, topic = "cancelled-commit", "offsets-of"

    def commit_request(offset: int) -> OffsetCommitRequest:
        return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
            OffsetCommitRequestTopic(name=topic, partitions=[
                OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])])

    def fetched(node: int) -> int | None:
        top, err, offset = offset_at(c.ports[node], group, topic, 0)
        if top == NOT_COORDINATOR:
            # its peers were paused past its lease (lifecycle.py): it answers again once its next
            # heartbeat is acknowledged (how long the pause lasted depends on the machine)
            return None
        assert top == err == 0, (top, err)
        return offset

    create_topic_at(c.ports[1], topic, 1)
    node = -1

    def first_commit() -> bool:
        nonlocal node
        node = coordinator(c.ports[1], group, 0)
        if node not in c.node_ids:
            return False
        raw = RawTxn(c.ports[node])
        try:
            resp = raw.request(commit_request(1), 7)
        finally:
            raw.close()
        assert isinstance(resp, OffsetCommitResponse)
        return resp.topics[0].partitions[0].error_code == 0

    c.wait_until(first_commit, timeout=30, message="a first offset commit")
    _sent_and_left(c, node, commit_request(42), 7, "__consumer_offsets")
    c.wait_until(lambda: fetched(node) == 42, timeout=20, message="the commit whose client left, applied")


def test_an_abort_marker_that_lands_while_txn_offsets_replicate_settles_them(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """A TxnOffsetCommit waits for the replicas; meanwhile a new instance fences the producer and
    the abort marker lands in the group's partition. The offsets were registered as pending only
    once replicated — after the marker — and waited for ever for another: OffsetFetch with
    require_stable answered UNSTABLE_OFFSET_COMMIT for good (the chaos copier that never resumed).
    `__transaction_state` has one replica here, so the abort needs no follower while they are paused."""
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env={**SHORT_SESSION,
                                      "KETCH_TRANSACTION_STATE_REPLICATION_FACTOR": "1"})
    listed_everywhere(c)
    group, topic = "racing-group", "racing-input"
    create_topic_at(c.ports[1], topic, 1)
    c.wait_until(lambda: coordinator(c.ports[1], group, 0) in c.node_ids, timeout=30, message="a group coordinator")
    node = coordinator(c.ports[1], group, 0)
    c.wait_until(lambda: coordinator(c.ports[1], "probe", 1) in c.node_ids, timeout=30,
                 message="__transaction_state")
    tid = next(t for t in (f"racing-{i}" for i in range(500)) if coordinator(c.ports[1], t, 1) == node)

    conn = RawTxn(c.ports[node])
    try:
        pid, epoch = conn.init_ok(tid)
        assert conn.add_offsets(tid, pid, epoch, group) == 0
        request = TxnOffsetCommitRequest(transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
                                         topics=[TxnOffsetCommitRequestTopic(name=topic, partitions=[
                                             TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=7)])])
        peers = [n for n in c.node_ids if n != node]
        for n in peers:
            c.pause(n)
        try:
            before = _log_bytes(c, node, "__consumer_offsets")
            conn.send(request, 3)
            c.wait_until(lambda: _log_bytes(c, node, "__consumer_offsets") > before, timeout=10,
                         message="the transaction's offsets appended")
            with_offsets = _log_bytes(c, node, "__consumer_offsets")
            fencer = RawTxn(c.ports[node])
            try:
                # a new instance fences the producer: the abort marker lands while the offsets wait
                # (the marker itself is answered only once replicated, so it is not waited for here)
                fencer.send(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60_000), 4)
                c.wait_until(lambda: _log_bytes(c, node, "__consumer_offsets") > with_offsets, timeout=10,
                             message="the abort marker appended")
            finally:
                fencer.close()
        finally:
            for n in peers:
                c.resume(n)
        _, resp = conn.receive(TxnOffsetCommitRequest, 3)
        assert isinstance(resp, TxnOffsetCommitResponse)
        assert resp.topics[0].partitions[0].error_code == 0, "the offsets replicated only after the marker"
    finally:
        conn.close()

    def stable() -> tuple[int, int] | None:
        top, err, offset = offset_at(c.ports[node], group, topic, 0, require_stable=True)
        # NOT_COORDINATOR: the pause outlasted the coordinator's lease; it answers again once a
        # heartbeat is acknowledged
        return None if err == UNSTABLE_OFFSET_COMMIT or top == NOT_COORDINATOR else (err, offset)

    answer: list[tuple[int, int]] = []
    c.wait_until(lambda: (got := stable()) is not None and not answer.append(got), timeout=15,
                 message="OffsetFetch(require_stable) to settle")
    assert answer[-1] == (0, -1)  # aborted: nothing committed


def test_a_marker_is_answered_as_written_only_once_the_in_sync_replicas_have_it(cluster: Cluster) -> None:
    """The coordinator completes a transaction on the leaders' answers and never sends those
    markers again: a marker only the leader held would be lost with it (the third long chaos
    campaign: a committed write read as aborted). With the followers paused the leader must not
    answer success; once they are back, it does."""
    c = cluster
    layout = new_topic(c, "marked", 1, 3, {"min.insync.replicas": "2"})
    leader = layout.partitions[0][1]
    marker = WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=424242, producer_epoch=0, transaction_result=False,
        topics=[WritableTxnMarkerTopic(name="marked", partition_indexes=[0])], coordinator_epoch=0)])

    def written() -> int:
        ib = Raw(int(c[leader].inter_broker_bootstrap.rsplit(":", 1)[1]))
        try:
            resp = ib.request(marker, 1)
        finally:
            ib.close()
        assert isinstance(resp, WriteTxnMarkersResponse)
        return resp.markers[0].topics[0].partitions[0].error_code

    peers = [n for n in c.node_ids if n != leader]
    for n in peers:
        c.pause(n)
    try:
        assert written() != 0  # appended, but only here: not answered as written
    finally:
        for n in peers:
            c.resume(n)
    c.wait_until(lambda: written() == 0, timeout=30, message="the marker written on the in-sync replicas")
