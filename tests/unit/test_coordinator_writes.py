"""The group coordinator's side of transactions, through the real request handlers on one broker's
real coordinators (BrokerContext in process, broker 2 a follower that fetches when the test says):

* a TxnOffsetCommit verified while its transaction was open must not be appended after that
  transaction's marker (KIP-890's VerificationGuard, as for a produce);
* a marker's offsets become visible only once the marker is on the in-sync replicas;
* the offsets partition of a group is counted on the topic's partitions, not the configuration's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.coordinator_cluster import ME, OTHER, Cluster, replicate, until

from broker.apis import txn_offset_commit, write_txn_markers
from broker.config import BrokerConfig
from broker.context import BrokerContext, ClientInfo
from broker.group.coordinator import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS, GroupCoordinator
from broker.metrics import BrokerMetrics
from broker.partition import AppendOrigin
from broker.partitioning import partition_for
from broker.producer_ids import ProducerIdAllocator
from broker.topics import TopicTable
from broker.txn.coordinator import TOPIC as TXN_TOPIC
from broker.txn.coordinator import TransactionCoordinator
from broker.txn.log_records import encode_key, encode_value
from broker.txn.state import TxnRecord, TxnState
from protocol.clock import SystemClock
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from protocol.records import build_control_batch
from protocol.topic_partition import TopicPartition

TID, GROUP = "copier", "g"
PID, EPOCH = 7, 3
EVERYTHING = 1 << 40  # a leader HW that covers whatever was copied
BROKER = ClientInfo(conn_id=1, peer="127.0.0.1:1", endpoint=("127.0.0.1", 9001), inter_broker=True)


@dataclass
class Broker:
    ctx: BrokerContext
    cluster: Cluster

    @property
    def groups(self) -> GroupCoordinator:
        return self.ctx.groups


async def _broker(tmp_path: Path, offsets_partitions: int = 1, configured: int = 1,
                  offsets_isr: tuple[int, ...] = (ME,)) -> Broker:
    """Broker 1 leading `__transaction_state` (holding TID's Ongoing transaction with the group's
    offsets partition in it), `__consumer_offsets` and the input topic `in`."""
    cfg = BrokerConfig(data_dir=str(tmp_path), node_id=ME, transaction_state_num_partitions=1,
                       offsets_topic_num_partitions=configured)
    clock = SystemClock()
    topics = TopicTable(cfg, clock)
    topics.load()
    cluster = Cluster(topics)
    metrics = BrokerMetrics()
    groups = GroupCoordinator(cfg, topics, clock)
    await groups.start()
    txn = TransactionCoordinator(cfg, topics, ProducerIdAllocator(ME, lambda: None, lambda: None), metrics, clock, lambda _: None)
    txn.load()
    ctx = BrokerContext(node_id=ME, config=cfg, clock=clock, topics=topics, groups=groups, txn=txn,
                        producer_ids=ProducerIdAllocator(ME, lambda: None, lambda: None), metrics=metrics)
    await cluster.image("in", ME, 0, {}, isr=(ME,))
    await cluster.image(OFFSETS_TOPIC, ME, 1, OFFSETS_TOPIC_CONFIGS, partitions=offsets_partitions, isr=offsets_isr)
    ongoing = TxnRecord(PID, EPOCH, -1, -1, -1, 60_000, TxnState.ONGOING,
                        frozenset({TopicPartition(OFFSETS_TOPIC, groups.partition_for(GROUP))}), 1_000, 1_000)
    await cluster.image(TXN_TOPIC, OTHER, 0, {"cleanup.policy": "compact"}, isr=(ME,))
    replicate(cluster.partition(TXN_TOPIC), encode_key(TID), encode_value(ongoing), 0, EVERYTHING)
    await cluster.image(TXN_TOPIC, ME, 1, {"cleanup.policy": "compact"}, isr=(ME,))
    await until(lambda: txn.owns(TID) and not groups.is_loading(groups.partition_for(GROUP)), message="loads")
    return Broker(ctx, cluster)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    b = await _broker(tmp_path)
    yield b
    await b.ctx.txn.stop()
    await b.ctx.groups.stop()
    b.cluster.close()


def _txn_offset_commit(offset: int) -> TxnOffsetCommitRequest:
    return TxnOffsetCommitRequest(transactional_id=TID, group_id=GROUP, producer_id=PID, producer_epoch=EPOCH,
                                  topics=[TxnOffsetCommitRequestTopic(name="in", partitions=[
                                      TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                                      committed_leader_epoch=-1,
                                                                      committed_metadata="")])])


def _marker(commit: bool, partition: int) -> WriteTxnMarkersRequest:
    return WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=PID, producer_epoch=EPOCH, transaction_result=commit, coordinator_epoch=1,
        topics=[WritableTxnMarkerTopic(name=OFFSETS_TOPIC, partition_indexes=[partition])])])


def _committed(groups: GroupCoordinator, require_stable: bool = False) -> tuple[int, int]:
    err, fetched = groups.fetch_offsets(GROUP, [TopicPartition("in", 0)], require_stable)
    assert err == 0
    [f] = fetched
    return f.error, f.offset


@pytest.mark.parametrize(("version", "refusal"), [(3, ErrorCode.INVALID_TXN_STATE),
                                                   (4, ErrorCode.TRANSACTION_ABORTABLE)])
async def test_a_txn_offset_commit_verified_before_its_transaction_ended_is_not_appended_after_the_marker(
        broker: Broker, version: int, refusal: ErrorCode) -> None:
    """The refusal is TRANSACTION_ABORTABLE for a client that knows it (KIP-1050): the transaction
    is over, not the producer, and INVALID_TXN_STATE is fatal for a TxnOffsetCommit client."""
    groups = broker.groups
    p = broker.cluster.partition(OFFSETS_TOPIC, groups.partition_for(GROUP))
    header = RequestHeader(api_key=txn_offset_commit.KEY, api_version=version, correlation_id=1,
                           client_id="zombie")
    request = asyncio.create_task(txn_offset_commit.handle(broker.ctx, BROKER, header, _txn_offset_commit(42)))
    # The coordinator said yes; the append is the group coordinator's own task, not run yet (the
    # loop is turned one step at a time: the marker must land between the two) ...
    deadline = asyncio.get_running_loop().time() + 10
    while not groups._commits:
        assert asyncio.get_running_loop().time() < deadline, "the offsets were never verified"
        await asyncio.sleep(0)
    assert p.log_end_offset == 0
    # ... when the transaction ends (aborted, say, by its timeout): its marker lands here first.
    p.append(build_control_batch(PID, EPOCH, False, 1, 1_000), AppendOrigin.COORDINATOR)
    groups.complete_txn(PID, False, p.index)
    response = await asyncio.wait_for(request, 10)
    codes = {q.error_code for t in response.topics for q in t.partitions}
    assert codes == {refusal}
    # nothing of a transaction nobody will end was left in the log or in the group
    assert p.last_stable_offset == p.log_end_offset == 1
    assert _committed(groups, require_stable=True) == (0, -1)


async def test_a_markers_offsets_become_visible_only_once_the_marker_is_replicated(tmp_path: Path) -> None:
    b = await _broker(tmp_path, offsets_isr=(ME, OTHER))
    try:
        groups = b.groups
        p = b.cluster.partition(OFFSETS_TOPIC, groups.partition_for(GROUP))
        header = RequestHeader(api_key=txn_offset_commit.KEY, api_version=3, correlation_id=1, client_id="copier")
        commit = asyncio.create_task(txn_offset_commit.handle(b.ctx, BROKER, header, _txn_offset_commit(42)))
        await until(lambda: p.log_end_offset == 1, message="the offsets appended")
        p.on_follower_fetch(OTHER, p.log_end_offset, p.log_start_offset)  # broker 2 has them: the commit is answered
        response = await asyncio.wait_for(commit, 10)
        assert {q.error_code for t in response.topics for q in t.partitions} == {0}
        assert _committed(groups, require_stable=True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
        header = RequestHeader(api_key=write_txn_markers.KEY, api_version=1, correlation_id=2, client_id="txn")
        marker = asyncio.create_task(write_txn_markers.handle(b.ctx, BROKER, header, _marker(True, p.index)))
        await until(lambda: p.log_end_offset == 2, message="the commit marker appended")
        # Only the leader has the marker: were it to fail now, the new leader would not have it.
        assert _committed(groups) == (0, -1)
        assert _committed(groups, require_stable=True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
        p.on_follower_fetch(OTHER, p.log_end_offset, p.log_start_offset)
        answer = await asyncio.wait_for(marker, 10)
        assert [q.error_code for m in answer.markers for t in m.topics for q in t.partitions] == [0]
        assert _committed(groups, require_stable=True) == (0, 42)
    finally:
        await b.ctx.txn.stop()
        await b.ctx.groups.stop()
        b.cluster.close()


async def test_groups_are_placed_by_the_offsets_topics_partition_count_not_the_configured_one(
        tmp_path: Path) -> None:
    """`__consumer_offsets` was created with 1 partition (an earlier configuration); the broker is
    now configured for 3: the records sit where 1 partition put them, so every group is on 0."""
    assert partition_for(GROUP, 3) != 0
    b = await _broker(tmp_path, offsets_partitions=1, configured=3)
    try:
        assert b.groups.partition_for(GROUP) == 0
        err, _ = b.groups.fetch_offsets(GROUP, [TopicPartition("in", 0)], False)
        assert err == 0
    finally:
        await b.ctx.txn.stop()
        await b.ctx.groups.stop()
        b.cluster.close()


async def test_stop_ends_a_timer_loop_woken_in_the_turn_that_cancels_it(tmp_path: Path) -> None:
    """The group coordinator's timer loop waits on its wake event; woken in the same turn of the
    event loop as stop() cancels it, asyncio.wait_for on Python 3.11 returns the wait and loses the
    cancellation (as the replica fetcher's loop did): a loop that ends only by being cancelled then
    waits on, and stop() never returns."""
    b = await _broker(tmp_path)
    groups = b.ctx.groups
    stopping: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    try:
        await asyncio.sleep(0.05)  # the timer loop is parked on its wake event
        groups._wake.set()  # noqa: SLF001 - wakes the waiting loop ...
        stopping = asyncio.ensure_future(groups.stop())  # ... in the turn that cancels it
        done, _ = await asyncio.wait([stopping], timeout=5)
        assert done, "stop() still waits on a timer loop that lost its cancellation"
    finally:
        stopping.cancel()
        await b.ctx.txn.stop()
        b.cluster.close()
