"""A transaction times out on its coordinator's monotonic clock, whatever the wall clocks do.

Simulation seed 18 (issue 26): a transaction's start time is written to `__transaction_state` on
the wall clock of the coordinator that began it. One coordinator's wall clock was then stepped an
hour back, and another took the partition over with its own clock behind the record's: the reaper
compared that start time with a wall clock an hour behind it, so the transaction was not aborted
for an hour, and its data held the last stable offset of every partition it had written to.

The real coordinator on a one-broker TopicTable, with its real reaper loop; the broker's clock is a
ManualClock whose wall clock the test steps and whose time the test moves.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from helpers.coordinator_cluster import ME, OTHER, Cluster, CountingIds, replicate, until

from broker.config import BrokerConfig
from broker.metrics import BrokerMetrics
from broker.topics import TopicTable
from broker.txn.coordinator import TOPIC as TXN_TOPIC
from broker.txn.coordinator import TransactionCoordinator
from broker.txn.log_records import encode_key, encode_value
from broker.txn.state import TxnRecord, TxnState
from protocol.clock import ManualClock
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

TID = "t-1"
T0 = 1_790_000_000_000
HOUR_MS = 3_600_000
TIMEOUT_MS = 1_000
EVERYTHING = 1 << 40
CONFIGS = {"cleanup.policy": "compact"}
ABORTED = (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT)



class World:
    def __init__(self, tmp_path: Path) -> None:
        self.clock = ManualClock(T0)
        cfg = BrokerConfig(data_dir=str(tmp_path), node_id=ME, transaction_state_num_partitions=1,
                           transaction_abort_timed_out_interval_ms=5)
        self.topics = TopicTable(cfg, self.clock)
        self.topics.load()
        self.cluster = Cluster(self.topics)
        self.coordinator = TransactionCoordinator(cfg, self.topics, CountingIds(), BrokerMetrics(), self.clock, lambda _: None)
        self.coordinator.load()

    def state(self) -> TxnState | None:
        meta = self.coordinator.describe(TID)
        return None if meta is None else meta.state

    async def aborted_within(self, ms: int) -> None:
        """Move the broker's time `ms` on in small steps, letting the reaper look after each; then
        the transaction must be aborted (its write given a few real seconds to finish)."""
        for _ in range(0, ms, 50):
            if self.state() in ABORTED:
                return
            self.clock.advance(50)
            await asyncio.sleep(0.01)  # a reaper pass or two (every 5 ms)
        await until(lambda: self.state() in ABORTED, 5.0, f"the abort (still {self.state()!r} {ms} ms on)")


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    w = World(tmp_path)
    yield w
    await w.coordinator.stop()
    w.cluster.close()


async def test_a_transaction_loaded_from_a_coordinator_whose_clock_was_ahead_times_out(world: World) -> None:
    # Broker 2 coordinated, its wall clock an hour ahead of this broker's (or this one's was stepped
    # back since): the Ongoing record's start time is an hour in this broker's future.
    ongoing = TxnRecord(7, 3, -1, -1, -1, TIMEOUT_MS, TxnState.ONGOING, frozenset({TopicPartition("gone", 0)}),
                        T0 + HOUR_MS, T0 + HOUR_MS)
    await world.cluster.image(TXN_TOPIC, OTHER, 0, CONFIGS, isr=(ME,))
    replicate(world.cluster.partition(TXN_TOPIC), encode_key(TID), encode_value(ongoing), 0, EVERYTHING)
    await world.cluster.image(TXN_TOPIC, ME, 1, CONFIGS, isr=(ME,))
    await until(lambda: world.coordinator.owns(TID), message="the load")
    assert world.state() == TxnState.ONGOING
    await world.coordinator.start()
    # Its timeout (and a pass of the reaper) after this coordinator took it over, it is aborted.
    await world.aborted_within(10 * TIMEOUT_MS)


async def test_a_transaction_begun_here_times_out_after_the_wall_clock_stepped_back(world: World) -> None:
    await world.cluster.image(TXN_TOPIC, ME, 0, CONFIGS, isr=(ME,))
    await until(lambda: world.coordinator.owns(TID), message="the partition's (empty) load")
    await world.coordinator.start()
    d = await world.coordinator.init_producer_id(TID, TIMEOUT_MS, -1, -1)
    assert d.error == ErrorCode.NONE
    assert await world.coordinator.add_partitions(TID, d.producer_id, d.producer_epoch,
                                                  [TopicPartition("gone", 0)]) == ErrorCode.NONE
    for _ in range(TIMEOUT_MS // 2 // 50):  # half its timeout, the reaper looking
        world.clock.advance(50)
        await asyncio.sleep(0.01)
    assert world.state() == TxnState.ONGOING
    world.clock.set(world.clock.now_ms() - HOUR_MS)  # an administrator (or NTP) sets the clock back
    await world.aborted_within(10 * TIMEOUT_MS)
