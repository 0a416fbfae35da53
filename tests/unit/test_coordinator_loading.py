"""A coordinator that takes over a partition of its internal topic serves only once everything its
log held when it was elected is committed — however long the in-sync replicas take to confirm it.

The real coordinators run on a real TopicTable driven by metadata images; the follower that
stalls is broker 2, which simply never fetches (its fetches are `on_follower_fetch` calls when it
comes back). The scenario is issue 23's: the old coordinator appended a PrepareCommit (or an
offset commit), the new leader has it in its log but its high watermark is still below it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from helpers.coordinator_cluster import ME, Cluster, replicate, until
from helpers.coordinator_cluster import OTHER as STALLED

import broker.group.coordinator as group_coordinator_module
import broker.txn.coordinator as txn_coordinator_module
from broker.config import BrokerConfig
from broker.group import records as grec
from broker.group.coordinator import OFFSETS_TOPIC, GroupCoordinator
from broker.metrics import BrokerMetrics
from broker.partition import AppendOrigin, Partition
from broker.partition.replica_state import Assignment
from broker.producer_ids import ProducerIdAllocator
from broker.topics import TopicTable
from broker.txn.coordinator import TOPIC as TXN_TOPIC
from broker.txn.coordinator import TransactionCoordinator
from broker.txn.log_records import encode_key, encode_value
from broker.txn.state import TxnRecord, TxnState
from protocol.clock import SystemClock
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch
from protocol.topic_partition import TopicPartition
from storage.config import LogConfig

TID = "t-1"
GROUP = "g-1"
# How long the stalled follower stays silent: several times the 10 s wait the loads used to give up
# after, as that wait is shortened below (a regression to any deadline shows within this window).
STALL_S = 0.6
OLD_WAIT_S = 0.1


@pytest.fixture
def cfg(tmp_path: Path) -> BrokerConfig:
    return BrokerConfig(data_dir=str(tmp_path), node_id=ME, transaction_state_num_partitions=1,
                        offsets_topic_num_partitions=1)


@pytest.fixture
async def cluster(cfg: BrokerConfig) -> AsyncIterator[Cluster]:
    topics = TopicTable(cfg, SystemClock())
    topics.load()
    c = Cluster(topics)
    yield c
    c.close()


def _txn_record(state: TxnState) -> TxnRecord:
    return TxnRecord(producer_id=7, producer_epoch=3, last_producer_id=-1, last_producer_epoch=-1,
                     next_producer_id=-1, timeout_ms=60_000, state=state,
                     partitions=frozenset({TopicPartition("out", 0)}), start_ms=1_000, update_ms=2_000)


TXN_CONFIGS = {"cleanup.policy": "compact"}


async def _txn_coordinator(cfg: BrokerConfig, cluster: Cluster) -> tuple[TransactionCoordinator, Partition]:
    """A transaction coordinator on broker 1, and its `__transaction_state` partition, which broker 2
    leads for now."""
    coordinator = TransactionCoordinator(cfg, cluster.topics, ProducerIdAllocator(ME, lambda: None, lambda: None),
                                         BrokerMetrics(), SystemClock(), lambda _: None)
    coordinator.load()
    await cluster.image(TXN_TOPIC, STALLED, 0, TXN_CONFIGS)
    return coordinator, cluster.partition(TXN_TOPIC)

OFFSET_KEY = grec.encode_key(grec.OffsetKey(GROUP, "in", 0))


async def _group_coordinator(cfg: BrokerConfig, cluster: Cluster) -> tuple[GroupCoordinator, Partition, dict[str, str]]:
    """A group coordinator on broker 1, and its `__consumer_offsets` partition (with the topic's
    configs), which broker 2 leads for now."""
    coordinator = GroupCoordinator(cfg, cluster.topics, SystemClock())
    await coordinator.start()
    configs = dict(group_coordinator_module.OFFSETS_TOPIC_CONFIGS)
    await cluster.image(OFFSETS_TOPIC, STALLED, 0, configs)
    return coordinator, cluster.partition(OFFSETS_TOPIC), configs


async def test_a_new_transaction_coordinator_does_not_load_before_its_log_is_committed(
        cfg: BrokerConfig, cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(txn_coordinator_module, "LOAD_WAIT_S", OLD_WAIT_S, raising=False)
    coordinator, p = await _txn_coordinator(cfg, cluster)
    configs = TXN_CONFIGS
    # Broker 2 coordinated: Ongoing (committed), then PrepareCommit — EndTxn was answered, but the
    # high watermark broker 1 last heard of does not cover the PrepareCommit yet.
    replicate(p, encode_key(TID), encode_value(_txn_record(TxnState.ONGOING)), 0, 0)
    replicate(p, encode_key(TID), encode_value(_txn_record(TxnState.PREPARE_COMMIT)), 0, 1)
    assert (p.high_watermark, p.log_end_offset) == (1, 2)
    try:
        # Broker 1 leads now; broker 2 stalls and stays in the ISR (the T3): no fetch confirms the log.
        await cluster.image(TXN_TOPIC, ME, 1, configs)
        assert p.is_leader and p.high_watermark == 1
        await asyncio.sleep(STALL_S)  # the stall itself: nothing may be served meanwhile
        assert not coordinator.owns(TID), "served before the PrepareCommit was known to be committed"
        assert coordinator.describe(TID) is None
        decision = await coordinator.end_txn(TID, 7, 3, True, bump_epoch=False)
        assert decision.error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # retriable: not yet
        # The follower comes back and confirms the log: now the coordinator loads all of it.
        p.on_follower_fetch(STALLED, p.log_end_offset, p.log_start_offset)
        assert p.high_watermark == 2
        await until(lambda: coordinator.owns(TID))
        meta = coordinator.describe(TID)
        assert meta is not None and meta.state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)
    finally:
        await coordinator.stop()


async def test_a_request_waiting_on_a_transition_is_sent_elsewhere_when_the_partition_goes(
        cfg: BrokerConfig, cluster: Cluster) -> None:
    """AddPartitionsToTxn waits while the id's previous transaction completes (CONCURRENT_TRANSACTIONS,
    decided again when the id changes); if the partition moves to another broker meanwhile, the
    unload wakes it, and it must be told NOT_COORDINATOR -- not decide on the emptied state, which
    answered INVALID_PRODUCER_ID_MAPPING, a fatal error for the client (simulation seed 3501 at
    60 s: a transactional producer died when its coordinator, back from a 15 s stall, found its
    partitions led elsewhere)."""
    coordinator, p = await _txn_coordinator(cfg, cluster)
    configs = TXN_CONFIGS
    replicate(p, encode_key(TID), encode_value(_txn_record(TxnState.PREPARE_COMMIT)), 0, 1)  # its markers never land
    try:
        await cluster.image(TXN_TOPIC, ME, 1, configs)
        await until(lambda: coordinator.owns(TID))
        waiting = asyncio.create_task(coordinator.add_partitions(TID, 7, 3, [TopicPartition("out", 1)]))
        await until(lambda: TID in coordinator._waiters, message="the request waiting for the completion")
        await cluster.image(TXN_TOPIC, STALLED, 2, configs)
        assert await asyncio.wait_for(waiting, 5) == ErrorCode.NOT_COORDINATOR
    finally:
        await coordinator.stop()


async def test_a_transaction_coordinator_moved_off_by_a_reassignment_serves_its_ids_no_more(
        cfg: BrokerConfig, cluster: Cluster) -> None:
    """The partition's replica moves to other brokers (an operator's reassignment): the replica
    goes from this broker, and with it the transactions it served -- kept, they were a second
    coordinator beside the new one: its reaper aborting from an old state, its requests
    answered from it (simulation, the fault `reap-flip`: a broker removed from the replicas of
    `__transaction_state-2` went on reaping `sim-t1` for 16 virtual s)."""
    coordinator, p = await _txn_coordinator(cfg, cluster)
    replicate(p, encode_key(TID), encode_value(_txn_record(TxnState.ONGOING)), 0, 1)
    try:
        await cluster.image(TXN_TOPIC, ME, 1, TXN_CONFIGS)
        await until(lambda: coordinator.owns(TID))
        await cluster.image(TXN_TOPIC, STALLED, 2, TXN_CONFIGS, isr=(STALLED,), replicas=(STALLED,))
        assert cluster.topics.partition(TXN_TOPIC, 0) is None  # the replica is gone from here
        assert not coordinator.owns(TID)
        assert coordinator.not_served(TID) == ErrorCode.NOT_COORDINATOR
        assert coordinator.describe(TID) is None
    finally:
        await coordinator.stop()


async def test_a_group_coordinator_moved_off_by_a_reassignment_serves_its_groups_no_more(
        cfg: BrokerConfig, cluster: Cluster) -> None:
    """As above, for `__consumer_offsets`: kept, the groups answered OffsetFetch from what they
    held when the replica moved."""
    coordinator, p, configs = await _group_coordinator(cfg, cluster)
    replicate(p, OFFSET_KEY, grec.encode_offset_value(grec.OffsetValue(10, commit_timestamp=1)), 0, 1)
    try:
        await cluster.image(OFFSETS_TOPIC, ME, 1, configs)
        await until(lambda: coordinator.fetch_offsets(GROUP, [("in", 0)], False)[0] == ErrorCode.NONE)
        await cluster.image(OFFSETS_TOPIC, STALLED, 2, configs, isr=(STALLED,), replicas=(STALLED,))
        assert cluster.topics.partition(OFFSETS_TOPIC, 0) is None
        err, _ = coordinator.fetch_offsets(GROUP, [("in", 0)], False)
        assert err == ErrorCode.NOT_COORDINATOR
    finally:
        await coordinator.stop()


async def test_a_new_group_coordinator_does_not_load_before_its_log_is_committed(
        cfg: BrokerConfig, cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(group_coordinator_module, "LOAD_WAIT_S", OLD_WAIT_S, raising=False)
    coordinator, p, configs = await _group_coordinator(cfg, cluster)
    replicate(p, OFFSET_KEY, grec.encode_offset_value(grec.OffsetValue(10, commit_timestamp=1)), 0, 0)
    replicate(p, OFFSET_KEY, grec.encode_offset_value(grec.OffsetValue(20, commit_timestamp=2)), 0, 1)
    assert (p.high_watermark, p.log_end_offset) == (1, 2)
    try:
        await cluster.image(OFFSETS_TOPIC, ME, 1, configs)
        await asyncio.sleep(STALL_S)
        err, _ = coordinator.fetch_offsets(GROUP, [("in", 0)], False)
        assert err == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "served offsets the ISR has not confirmed"
        p.on_follower_fetch(STALLED, p.log_end_offset, p.log_start_offset)
        await until(lambda: not coordinator.is_loading(0))
        err, fetched = coordinator.fetch_offsets(GROUP, [("in", 0)], False)
        assert err == 0 and [f.offset for f in fetched] == [20]
    finally:
        await coordinator.stop()


# ---- the wait itself (Partition.caught_up_as_leader) -------------------------------------------
def _follower_with_uncommitted_tail(path: Path) -> Partition:
    p = Partition.open(path, "t", 0, LogConfig(), ME, SystemClock())
    p.become_follower(Assignment((ME, STALLED), frozenset({ME, STALLED}), STALLED, 0, 0))
    p.append_replicated(build_batch([Record(i, 0, None, b"v") for i in range(2)], partition_leader_epoch=0), 0, 0)
    p.become_leader(Assignment((ME, STALLED), frozenset({ME, STALLED}), ME, 1, 1))
    assert (p._state.leader_epoch_start_offset, p.high_watermark) == (2, 0)
    return p


async def test_the_wait_is_for_the_log_end_at_election_not_for_later_appends(tmp_path: Path) -> None:
    p = _follower_with_uncommitted_tail(tmp_path)
    try:
        p.append(build_batch([Record(0, 0, None, b"later")]), AppendOrigin.COORDINATOR)
        waiting = asyncio.create_task(p.caught_up_as_leader())
        p.on_follower_fetch(STALLED, 2, p.log_start_offset)  # the follower has what the log held at election, not the new record
        assert await asyncio.wait_for(waiting, 5) is True
    finally:
        p.close()


async def test_the_wait_ends_false_when_the_epoch_changes_leadership_goes_or_the_replica_closes(tmp_path: Path) -> None:
    p = _follower_with_uncommitted_tail(tmp_path)
    try:
        waiting = asyncio.create_task(p.caught_up_as_leader())
        await asyncio.sleep(0)
        # re-elected under a new epoch: what the first election's wait promised no longer holds
        p.become_leader(Assignment((ME, STALLED), frozenset({ME, STALLED}), ME, 2, 2))
        assert await asyncio.wait_for(waiting, 5) is False
        waiting = asyncio.create_task(p.caught_up_as_leader())
        await asyncio.sleep(0)
        p.become_follower(Assignment((ME, STALLED), frozenset({ME, STALLED}), STALLED, 3, 3))
        assert await asyncio.wait_for(waiting, 5) is False
        # led again, then the replica is moved off this broker: nothing left to wait for
        p.become_leader(Assignment((ME, STALLED), frozenset({ME, STALLED}), ME, 4, 4))
        waiting = asyncio.create_task(p.caught_up_as_leader())
        await asyncio.sleep(0)
        p.close()
        assert await asyncio.wait_for(waiting, 5) is False
    finally:
        p.close()


# ---- a superseded group load (issue 23 item 8) -------------------------------------------------
async def test_a_group_load_superseded_by_a_new_election_stops_and_the_new_one_reads_everything(
        cfg: BrokerConfig, cluster: Cluster) -> None:
    cfg = dataclasses.replace(cfg, offsets_load_buffer_size=1)  # one batch per chunk
    coordinator = GroupCoordinator(cfg, cluster.topics, SystemClock())
    await coordinator.start()
    configs = dict(group_coordinator_module.OFFSETS_TOPIC_CONFIGS)
    await cluster.image(OFFSETS_TOPIC, STALLED, 0, configs)
    p = cluster.partition(OFFSETS_TOPIC)
    first = grec.encode_key(grec.OffsetKey("first", "in", 0))
    everything = 1 << 40  # the old leader's HW covers all it sent
    replicate(p, first, grec.encode_offset_value(grec.OffsetValue(10, commit_timestamp=1)), 0, everything)
    for i in range(200):  # other groups' commits: the load takes a loop turn each
        key = grec.encode_key(grec.OffsetKey(f"g{i}", "in", 0))
        replicate(p, key, grec.encode_offset_value(grec.OffsetValue(i, commit_timestamp=1)), 0, everything)
    assert p.high_watermark == p.log_end_offset
    try:
        await cluster.image(OFFSETS_TOPIC, ME, 1, configs)  # committed at once: the load starts reading
        loading = coordinator.sm.loading

        def read_some() -> bool:
            ld = loading.get(0)
            return ld is not None and "first" in ld.offsets and "g150" not in ld.offsets

        deadline = asyncio.get_running_loop().time() + 10
        while not read_some():
            assert asyncio.get_running_loop().time() < deadline, "the load never got going"
            await asyncio.sleep(0)
        # Leadership goes to broker 2 (which appends a commit broker 1 copies, its HW not yet
        # covering it) and comes back, all within one loop turn: a new load under epoch 3 waits for
        # that commit to be committed and reads from the start; the first load, half way through
        # its read, must stop — not feed the new one, nor finish it before its log is committed.
        superseded = set(coordinator._loads)
        await cluster.image(OFFSETS_TOPIC, STALLED, 2, configs)
        late = grec.encode_key(grec.OffsetKey("late", "in", 0))
        replicate(p, late, grec.encode_offset_value(grec.OffsetValue(5, commit_timestamp=1)), 2, p.log_end_offset)
        await cluster.image(OFFSETS_TOPIC, ME, 3, configs)
        await asyncio.wait_for(asyncio.gather(*superseded), 10)
        assert coordinator.is_loading(0), "a superseded load finished the new one"
        p.on_follower_fetch(STALLED, p.log_end_offset, p.log_start_offset)
        await until(lambda: not coordinator.is_loading(0))
        for group, offset in (("first", 10), ("g199", 199), ("late", 5)):
            err, fetched = coordinator.fetch_offsets(group, [("in", 0)], False)
            assert err == 0 and [f.offset for f in fetched] == [offset], group
        assert len(coordinator.sm.groups) == 202
    finally:
        await coordinator.stop()


async def test_find_coordinator_names_a_loading_transaction_coordinator_as_kafka_does(
        cfg: BrokerConfig, cluster: Cluster) -> None:
    """While the new leader of a `__transaction_state` partition loads it, FindCoordinator names
    that leader (Kafka answers from the partition's leader, loaded or not) and the coordinator's
    own requests answer COORDINATOR_LOAD_IN_PROGRESS. COORDINATOR_NOT_AVAILABLE from
    FindCoordinator is an answer librdkafka's coordinator lookup retries only twice before it waits
    for some broker connection to change state (rdkafka_coord.c), with no deadline of its own."""
    from broker.apis import find_coordinator
    from broker.context import BrokerContext, ClientInfo
    from protocol.headers import RequestHeader
    from protocol.messages.find_coordinator import FindCoordinatorRequest

    txn = TransactionCoordinator(cfg, cluster.topics, ProducerIdAllocator(ME, lambda: None, lambda: None),
                                 BrokerMetrics(), SystemClock(), lambda _: None)
    txn.load()
    groups = GroupCoordinator(cfg, cluster.topics, SystemClock())
    await groups.start()
    configs = {"cleanup.policy": "compact"}
    await cluster.image(TXN_TOPIC, STALLED, 0, configs)
    replicate(cluster.partition(TXN_TOPIC), encode_key(TID), encode_value(_txn_record(TxnState.ONGOING)), 0, 0)
    ctx = BrokerContext(ME, cfg, SystemClock(), cluster.topics, groups, txn, ProducerIdAllocator(ME, lambda: None, lambda: None),
                        BrokerMetrics())
    client = ClientInfo(conn_id=1, peer="test", endpoint=("127.0.0.1", 9000 + ME))
    try:
        await cluster.image(TXN_TOPIC, ME, 1, configs)  # this broker leads now; broker 2 stalls in the ISR
        assert not txn.owns(TID)  # loading
        header = RequestHeader(api_key=find_coordinator.KEY, api_version=4, correlation_id=1, client_id="t")
        resp = await find_coordinator.handle(ctx, client, header, FindCoordinatorRequest(key_type=1, coordinator_keys=[TID]))
        (c,) = resp.coordinators
        assert (c.error_code, c.node_id, c.port) == (0, ME, 9000 + ME), c
        decision = await txn.end_txn(TID, 7, 3, True, bump_epoch=False)
        assert decision.error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # the coordinator says "retry"
    finally:
        await txn.stop()
        await groups.stop()
