"""A leader and a follower Partition driven fetch by fetch, as broker/apis/fetch.py and the
replica fetcher drive them, without sockets: the follower's high watermark and log start, and
what DeleteRecords waits for."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.partition import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendOrigin,
    Isolation,
    Partition,
)
from broker.partition.replica_state import Assignment
from protocol.clock import ManualClock
from protocol.errors import ErrorCode, KafkaError
from protocol.records import Record, build_batch
from storage.config import LogConfig

LEADER = 1


def _batch(n: int, timestamp: int | None = None) -> bytes:
    return build_batch((Record(i, 0, None, b"v%d" % i) for i in range(n)), base_timestamp=timestamp)


@pytest.fixture
def clock() -> ManualClock:
    """Every replica's clock: time moves only when a test moves it, timeouts included."""
    return ManualClock(1_000_000_000)


def _open(tmp_path: Path, replicas: tuple[int, ...], clock: ManualClock) -> list[Partition]:
    """The leader (1) and its followers of one partition, all in the ISR."""
    a = Assignment(replicas, frozenset(replicas), LEADER, 3, 0)
    parts = [Partition.open(tmp_path / str(i), "t", 0, LogConfig(), i, clock) for i in replicas]
    parts[0].become_leader(a)
    for p in parts[1:]:
        p.become_follower(a)
    return parts


@pytest.fixture
def replicas(tmp_path: Path, clock: ManualClock) -> Iterator[list[Partition]]:
    parts = _open(tmp_path, (1, 2, 3), clock)
    yield parts
    for p in parts:
        p.close()


@pytest.fixture
def pair(tmp_path: Path, clock: ManualClock) -> Iterator[list[Partition]]:
    parts = _open(tmp_path, (1, 2), clock)
    yield parts
    for p in parts:
        p.close()


def fetch(leader: Partition, follower: Partition) -> None:
    """One replica fetch: the leader records the follower's position, then reads for it; the
    follower appends what came with the leader's high watermark and log start."""
    offset = follower.log_end_offset
    assert leader.diverging(offset, follower.latest_epoch) is None
    leader.on_follower_fetch(follower._state.local_id, offset, follower.log_start_offset)
    r = leader.read(offset, 1 << 20, Isolation.LOG_END, leader.leader_epoch)
    follower.append_replicated(bytes(r.records), r.high_watermark, r.log_start_offset)


def test_a_follower_keeps_following_the_high_watermark_once_the_leaders_log_start_passed_it(
        replicas: list[Partition]) -> None:
    """Issue 23 item 4: the leader's HW moved on follower 3's fetch, DeleteRecords moved its log
    start past follower 2's HW, and follower 2's next fetch raised OFFSET_OUT_OF_RANGE on its
    log start move before it took the HW — on that fetch and every later one."""
    leader, f2, f3 = replicas
    leader.append(_batch(10), AppendOrigin.CLIENT)
    fetch(leader, f2)
    fetch(leader, f3)
    fetch(leader, f2)
    assert leader.high_watermark == 0 and f2.high_watermark == 0  # 3 has not confirmed its copy yet
    fetch(leader, f3)
    assert leader.high_watermark == 10 and f2.high_watermark == 0
    assert leader.delete_records(8) == 8
    leader.append(_batch(5), AppendOrigin.CLIENT)
    fetch(leader, f2)
    assert (f2.log_start_offset, f2.high_watermark, f2.log_end_offset) == (8, 10, 15)
    for f in (f3, f2, f3, f2):
        fetch(leader, f)
    assert leader.high_watermark == f2.high_watermark == f3.high_watermark == 15
    assert f2.log_start_offset == f3.log_start_offset == 8


def test_a_follower_high_watermark_below_the_leaders_new_log_start(pair: list[Partition]) -> None:
    """An answer whose HW is older than its log start (an HW of 5, a start of 8): the start
    still moves, and the follower's HW with it."""
    leader, follower = pair
    leader.append(_batch(5), AppendOrigin.CLIENT)
    fetch(leader, follower)
    fetch(leader, follower)
    assert follower.high_watermark == 5
    leader.append(_batch(5), AppendOrigin.CLIENT)
    fetch(leader, follower)
    assert follower.log_end_offset == 10 and follower.high_watermark == 5
    leader.on_follower_fetch(2, 10, 0)  # a fetch whose answer was lost: the leader's HW is 10
    assert leader.delete_records(8) == 8
    r = leader.read(10, 1 << 20, Isolation.LOG_END, leader.leader_epoch)
    follower.append_replicated(bytes(r.records), 5, r.log_start_offset)  # an HW from before, a start from now
    assert (follower.log_start_offset, follower.high_watermark) == (8, 8)
    fetch(leader, follower)
    assert follower.high_watermark == 10


async def test_delete_records_is_answered_once_every_live_replica_has_moved_its_log_start(
        replicas: list[Partition], clock: ManualClock) -> None:
    """Kafka's DelayedDeleteRecords: the answer waits for the low watermark (the smallest log
    start over the leader and the followers on live brokers), so a failover to any of them cannot
    bring the deleted records back. Before, the leader answered with its own start at once."""
    leader, f2, f3 = replicas
    leader.append(_batch(10), AppendOrigin.CLIENT)
    for f in (f2, f3, f2, f3):
        fetch(leader, f)
    assert leader.high_watermark == 10
    assert leader.delete_records(6) == 6
    waiting = asyncio.create_task(leader.replicas_deleted_before(6, timeout_s=5))
    await asyncio.sleep(0)
    fetch(leader, f2)  # f2 learns the start here, and reports it with its next fetch
    fetch(leader, f3)
    fetch(leader, f2)
    await asyncio.sleep(0)
    assert not waiting.done() and leader.low_watermark == 0  # f3 has not reported its start yet
    fetch(leader, f3)
    assert await asyncio.wait_for(waiting, 1) == (6, ErrorCode.NONE)

    # a replica on a fenced broker is not waited for; a lagging live one is, up to the timeout
    leader.set_ineligible({3})
    assert leader.delete_records(8) == 8
    asyncio.get_running_loop().call_soon(clock.advance, 60)  # the 50 ms run out while it waits
    assert await leader.replicas_deleted_before(8, timeout_s=0.05) == (6, ErrorCode.REQUEST_TIMED_OUT)
    fetch(leader, f2)
    fetch(leader, f2)
    assert await leader.replicas_deleted_before(8, timeout_s=0.05) == (8, ErrorCode.NONE)


async def test_delete_records_waiting_for_followers_ends_with_the_leadership(replicas: list[Partition]) -> None:
    leader, f2, f3 = replicas
    leader.append(_batch(4), AppendOrigin.CLIENT)
    for f in (f2, f3, f2, f3):
        fetch(leader, f)
    assert leader.delete_records(2) == 2
    waiting = asyncio.create_task(leader.replicas_deleted_before(2, timeout_s=5))
    await asyncio.sleep(0)
    leader.become_follower(Assignment((1, 2, 3), frozenset({2, 3}), 2, 4, 1))
    assert await asyncio.wait_for(waiting, 1) == (-1, ErrorCode.NOT_LEADER_OR_FOLLOWER)


def test_a_new_leader_answers_offset_not_available_until_its_high_watermark_reaches_its_epoch_start(
        replicas: list[Partition]) -> None:
    """Kafka's Partition.fetchOffsetForTimestamp: a leader whose high watermark (what it knew as a
    follower) is below where its epoch began does not yet know what is committed: "latest", and
    a timestamp whose record is not below the high watermark, answer OFFSET_NOT_AVAILABLE
    (retriable) rather than an offset that moves back or a "no such record". "earliest" and
    records below the high watermark are answered."""
    old, f2, f3 = replicas
    old.append(_batch(5, timestamp=1_000), AppendOrigin.CLIENT)
    for f in (f2, f3, f2, f3):
        fetch(old, f)
    old.append(_batch(5, timestamp=2_000), AppendOrigin.CLIENT)
    fetch(old, f2)
    assert (f2.log_end_offset, f2.high_watermark, f3.log_end_offset) == (10, 5, 5)

    a = Assignment((1, 2, 3), frozenset({2, 3}), 2, 4, 1)
    f2.become_leader(a)
    f3.become_follower(a)
    for timestamp in (LATEST_TIMESTAMP, 2_000, MAX_TIMESTAMP):
        with pytest.raises(KafkaError) as e:
            f2.offset_for(timestamp, Isolation.READ_UNCOMMITTED, 4)
        assert e.value.code == ErrorCode.OFFSET_NOT_AVAILABLE
    assert f2.offset_for(EARLIEST_TIMESTAMP, Isolation.READ_UNCOMMITTED, 4) == (0, -1)
    assert f2.offset_for(1_000, Isolation.READ_UNCOMMITTED, 4) == (0, 1_000)
    fetch(f2, f3)
    fetch(f2, f3)
    assert f2.high_watermark == 10
    assert f2.offset_for(LATEST_TIMESTAMP, Isolation.READ_UNCOMMITTED, 4) == (10, -1)
    assert f2.offset_for(2_000, Isolation.READ_UNCOMMITTED, 4) == (5, 2_000)
    assert f2.offset_for(3_000, Isolation.READ_UNCOMMITTED, 4) == (-1, -1)  # no such record: not an error
