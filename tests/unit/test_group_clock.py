"""The group coordinator's two clocks: a member's session and a rebalance's timeout run on the
monotonic clock, so that setting the system clock neither ends nor extends them; what is written
down (an offset's commit timestamp, a group's state timestamp) follows the wall clock.

A real GroupCoordinator on a real TopicTable (this broker leads `__consumer_offsets`, in process:
tests/helpers/coordinator_cluster.py), on a ManualClock: `set` steps the wall clock alone, as an
administrator or NTP would, `advance` moves both. After a step, an event wakes the coordinator's
timer loop, which then fires whatever its deadlines say is due.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from helpers.coordinator_cluster import ME, Cluster, until

from broker.config import BrokerConfig
from broker.group import records as rec
from broker.group.coordinator import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS, GroupCoordinator
from broker.group.model import JoinRequest, JoinResult, OffsetCommitIn, SyncRequest
from broker.partition import Isolation
from broker.topics import TopicTable
from protocol.clock import ManualClock, SystemClock
from protocol.errors import ErrorCode
from protocol.records import decode_batches
from protocol.topic_partition import TopicPartition

HOUR = 3_600_000
SESSION = 10_000
WITNESS_SESSION = 6_000  # shorter than SESSION: the group whose expiry shows the timers have run
REBALANCE = 30_000
T0 = 1_700_000_000_000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
async def groups(tmp_path: Path, clock: ManualClock) -> AsyncIterator[GroupCoordinator]:
    cfg = BrokerConfig(data_dir=str(tmp_path), node_id=ME, offsets_topic_num_partitions=1,
                       group_initial_rebalance_delay_ms=0)
    topics = TopicTable(cfg, SystemClock())
    topics.load()
    cluster = Cluster(topics)
    coordinator = GroupCoordinator(cfg, topics, clock)
    await coordinator.start()
    await cluster.image("in", ME, 0, {}, isr=(ME,))
    await cluster.image(OFFSETS_TOPIC, ME, 1, OFFSETS_TOPIC_CONFIGS, isr=(ME,))
    await until(lambda: coordinator.partition_for("g") == 0 and not coordinator.is_loading(0), message="loaded")
    yield coordinator
    await coordinator.stop()
    cluster.close()


def _join(group: str, session: int = SESSION) -> JoinRequest:
    return JoinRequest(group, "", None, "c", "/127.0.0.1", session, REBALANCE, "consumer", [("range", b"")], False)


async def _stable(groups: GroupCoordinator, group: str, session: int = SESSION) -> str:
    """A group of one member, through JoinGroup and SyncGroup: the member's id."""
    joined = await groups.join(_join(group, session))
    assert joined.error == 0
    synced = await groups.sync(SyncRequest(group, joined.generation_id, joined.member_id, None, None, None,
                                           {joined.member_id: b"a"}))
    assert synced.error == 0
    return joined.member_id


async def _rebalancing(groups: GroupCoordinator, group: str) -> asyncio.Future[JoinResult]:
    """A Stable group that a second member joins: the join phase waits for the first to rejoin
    within REBALANCE (its session of SESSION goes on meanwhile). The second member's JoinGroup."""
    await _stable(groups, group)
    second = asyncio.ensure_future(groups.join(_join(group)))
    await until(lambda: groups.describe_group(group)[1].state == "PreparingRebalance", message="rebalancing")
    return second


def _members(groups: GroupCoordinator, group: str) -> set[str]:
    return {m.member_id for m in groups.describe_group(group)[1].members}


def _wake(groups: GroupCoordinator) -> None:
    """Any event wakes the timer loop: a heartbeat from nobody is one that changes nothing."""
    assert groups.heartbeat("nobody", "nobody", None, 1) == ErrorCode.UNKNOWN_MEMBER_ID


async def test_setting_the_clock_forward_ends_no_session_and_no_rebalance(groups: GroupCoordinator,
                                                                          clock: ManualClock) -> None:
    member = await _stable(groups, "g")
    second = await _rebalancing(groups, "r")
    witness = await _stable(groups, "w", WITNESS_SESSION)
    clock.set(clock.now_ms() + HOUR)
    clock.advance(WITNESS_SESSION + 1)  # the witness's session is over; nobody else's
    _wake(groups)
    await until(lambda: witness not in _members(groups, "w"), message="the witness's session to end")
    assert _members(groups, "g") == {member}
    assert groups.describe_group("r")[1].state == "PreparingRebalance" and not second.done()
    assert groups.heartbeat("g", member, None, 1) == 0


async def test_setting_the_clock_back_extends_no_session_and_no_rebalance(groups: GroupCoordinator,
                                                                          clock: ManualClock) -> None:
    member = await _stable(groups, "g")
    second = await _rebalancing(groups, "r")
    clock.set(clock.now_ms() - HOUR)
    clock.advance(REBALANCE + 1)  # past every session and the rebalance timeout
    _wake(groups)
    await until(lambda: member not in _members(groups, "g"), message="the session to end")
    result = await asyncio.wait_for(second, 10)  # the first member never rejoined: the group goes on without it
    assert result.error == 0 and _members(groups, "r") == {result.member_id}


async def test_what_is_written_down_follows_the_wall_clock(groups: GroupCoordinator, clock: ManualClock) -> None:
    clock.set(clock.now_ms() + HOUR)
    wall = clock.now_ms()
    await _stable(groups, "g")
    errors = await groups.commit_offsets("g-offsets", "", None, -1, {TopicPartition("in", 0): OffsetCommitIn(5)})
    assert errors == {TopicPartition("in", 0): 0}
    p = groups.topics.partition(OFFSETS_TOPIC, 0)
    assert p is not None
    read = p.read(0, 1 << 20, Isolation.READ_UNCOMMITTED)
    written = [(rec.decode_key(r.key), r.value) for _, records in decode_batches(bytes(read.records))
               for r in records if r.key is not None and r.value is not None]
    assert [rec.decode_group_value(v).state_timestamp for k, v in written if isinstance(k, rec.GroupKey)] == [wall]
    assert [rec.decode_offset_value(v).commit_timestamp for k, v in written if isinstance(k, rec.OffsetKey)] == [wall]
