"""How many replication rounds a transaction's `__transaction_state` records cost on a cluster.

Every record the transaction coordinator acts on waits until the in-sync replicas have it, and a
follower gets records only by fetching: its fetch, parked at the leader, wakes at an append and
takes what the log holds then. A producer's next AddPartitionsToTxn waits (docs/transactions.md)
until the previous transaction's CompleteCommit is appended; if its own record (Ongoing) is
appended a loop turn or more later, the parked fetch has already left with the CompleteCommit
alone, and the Ongoing record waits for the whole next round — one more replication round trip
on every small transaction (issue 24: the profile on three brokers showed the two records
shipped in two rounds).

The real coordinator on broker 1 of a two-broker cluster (helpers/coordinator_cluster.py);
broker 2's replica fetch is a task parked exactly as the Fetch handler parks
(`wait_for_change`), which copies whatever the log holds when it wakes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from helpers.coordinator_cluster import ME, OTHER, Cluster, CountingIds, until

from broker.config import BrokerConfig
from broker.metrics import BrokerMetrics
from broker.partition import Partition, wait_for_change
from broker.topics import TopicTable
from broker.txn.coordinator import TOPIC as TXN_TOPIC
from broker.txn.coordinator import TransactionCoordinator
from broker.txn.state import TxnState
from protocol.clock import SystemClock
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

TID = "t-1"
DATA = [TopicPartition("gone", 0)]  # no such topic: its marker counts as written at once
CONFIGS = {"cleanup.policy": "compact"}



class Follower:
    """Broker 2's replica fetch: parked on the partition, it wakes at a change, copies up to the
    log end it finds (each wake with new records is one round), and fetches again at once."""

    def __init__(self, part: Partition) -> None:
        self.part = part
        self.copied = 0
        self.rounds: list[int] = []  # the log end each round copied up to
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            end = self.part.log_end_offset
            if end > self.copied:
                self.copied = end
                self.rounds.append(end)
            self.part.on_follower_fetch(OTHER, self.copied, 0)
            await wait_for_change((self.part,), 5.0)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[tuple[Cluster, TransactionCoordinator]]:
    clock = SystemClock()
    cfg = BrokerConfig(data_dir=str(tmp_path), node_id=ME, transaction_state_num_partitions=1)
    topics = TopicTable(cfg, clock)
    topics.load()
    cluster = Cluster(topics)
    coordinator = TransactionCoordinator(cfg, topics, CountingIds(), BrokerMetrics(), clock, lambda _: None)
    coordinator.load()
    yield cluster, coordinator
    await coordinator.stop()
    cluster.close()


async def test_the_next_transactions_record_leaves_with_the_previous_ones_completion(
        world: tuple[Cluster, TransactionCoordinator]) -> None:
    cluster, coordinator = world
    await cluster.image(TXN_TOPIC, ME, 0, CONFIGS)  # broker 2 in the ISR: every record waits for it
    await until(lambda: coordinator.owns(TID), message="the partition's (empty) load")
    follower = Follower(cluster.partition(TXN_TOPIC))
    try:
        d = await coordinator.init_producer_id(TID, 60_000, -1, -1)
        assert d.error == ErrorCode.NONE
        pid, epoch = d.producer_id, d.producer_epoch
        assert await coordinator.add_partitions(TID, pid, epoch, DATA) == ErrorCode.NONE
        # The marker sender is not started yet: the commit stays PrepareCommit until it is.
        assert (await coordinator.end_txn(TID, pid, epoch, True, bump_epoch=False)).error == ErrorCode.NONE
        assert coordinator.describe(TID).state == TxnState.PREPARE_COMMIT  # type: ignore[union-attr]
        # The producer's next transaction begins: held until the previous one is complete.
        nxt = asyncio.get_running_loop().create_task(coordinator.add_partitions(TID, pid, epoch, DATA))
        await until(lambda: TID in coordinator._waiters, message="AddPartitionsToTxn waiting for the completion")
        before = len(follower.rounds)
        await coordinator.start()  # the markers go (counted as written), CompleteCommit is appended
        assert await asyncio.wait_for(nxt, 10) == ErrorCode.NONE
        assert coordinator.describe(TID).state == TxnState.ONGOING  # type: ignore[union-attr]
        # CompleteCommit and Ongoing reached broker 2 in one round, not one round each.
        assert len(follower.rounds) - before == 1, follower.rounds[before:]
    finally:
        follower.task.cancel()


async def test_a_completion_asks_for_no_sync_of_its_own(world: tuple[Cluster, TransactionCoordinator]) -> None:
    """One broker: the next transaction's record is synced with the completion before it, so the
    completion needs no fsync of its own (nobody waits for it: docs/transactions.md, Durability).
    Before, it asked for one; a producer whose next AddPartitionsToTxn came in while that sync
    ran waited for it and then for its own — two fsyncs in a row on the transaction's path
    (issue 24: 3.9 fsyncs per one-message transaction where 3 are needed)."""
    cluster, coordinator = world
    await cluster.image(TXN_TOPIC, ME, 0, CONFIGS, isr=(ME,))  # alone in the ISR: the disk vouches
    await until(lambda: coordinator.owns(TID), message="the partition's (empty) load")
    syncs = cluster.topics.group_commit
    d = await coordinator.init_producer_id(TID, 60_000, -1, -1)
    pid, epoch = d.producer_id, d.producer_epoch
    assert await coordinator.add_partitions(TID, pid, epoch, DATA) == ErrorCode.NONE
    assert (await coordinator.end_txn(TID, pid, epoch, True, bump_epoch=False)).error == ErrorCode.NONE
    asked = syncs.waiters
    await coordinator.start()  # the markers go (counted as written), CompleteCommit is appended
    await until(lambda: coordinator.describe(TID).state == TxnState.COMPLETE_COMMIT,  # type: ignore[union-attr]
                message="CompleteCommit")
    # The producer's next transaction begins after the completion: its record's sync is the only one.
    assert await coordinator.add_partitions(TID, pid, epoch, DATA) == ErrorCode.NONE
    assert syncs.waiters - asked == 1
