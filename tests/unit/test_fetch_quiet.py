"""The shortcut broker/apis/fetch.py takes in an incremental fetch session: a partition whose read
could only give an answer the response leaves out is not read at all (`_quiet`). On real
partitions, in every state a fetch can meet, the shortcut must agree exactly with reading the
partition and asking broker/fetch_session.py's `must_answer`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.apis.fetch import _quiet, _read, _replica_read
from broker.fetch_session import Told, must_answer
from broker.partition import AppendOrigin, Isolation, Partition
from broker.partition.replica_state import Assignment
from protocol.clock import ManualClock
from protocol.messages.fetch import FetchPartition, PartitionData
from protocol.records import Record, build_batch
from storage.config import LogConfig

LEADER, FOLLOWER = 1, 2


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Partition, Partition]]:
    a = Assignment((LEADER, FOLLOWER), frozenset((LEADER, FOLLOWER)), LEADER, 3, 0)
    clock = ManualClock(1_000_000_000)
    parts = [Partition.open(tmp_path / str(i), "t", 0, LogConfig(), i, clock) for i in (LEADER, FOLLOWER)]
    parts[0].become_leader(a)
    parts[1].become_follower(a)
    yield parts[0], parts[1]
    for p in parts:
        p.close()


def _batch(n: int, *, pid: int = -1, transactional: bool = False) -> bytes:
    return build_batch((Record(i, 0, None, b"v") for i in range(n)), producer_id=pid, producer_epoch=0 if pid >= 0
                       else -1, base_sequence=0 if pid >= 0 else -1, transactional=transactional)


def told_now(part: Partition) -> Told:
    return Told(part.high_watermark, part.last_stable_offset, part.log_start_offset)


def fp(part: Partition, offset: int, *, epoch: int | None = None, last_fetched: int = -1) -> FetchPartition:
    return FetchPartition(partition=0, fetch_offset=offset, current_leader_epoch=part.leader_epoch if epoch is None
                          else epoch, last_fetched_epoch=last_fetched, partition_max_bytes=1 << 20)


def check(part: Partition, f: FetchPartition, told: Told, *, replica: bool,
          isolation: Isolation = Isolation.READ_UNCOMMITTED) -> bool:
    """The shortcut's verdict, after checking it against a real read."""
    pd: PartitionData = (_replica_read(part, f, 1 << 20, True) if replica
                         else _read(part, f.fetch_offset, 1 << 20, isolation, f.current_leader_epoch, True))[0]
    quiet = _quiet(part, f, told, replica, isolation)
    assert quiet == (not must_answer(told, pd)), (quiet, pd)
    return quiet


def follower_fetch(leader: Partition, follower: Partition) -> None:
    leader.on_follower_fetch(FOLLOWER, follower.log_end_offset, follower.log_start_offset)
    r = leader.read(follower.log_end_offset, 1 << 20, Isolation.LOG_END, leader.leader_epoch)
    follower.append_replicated(bytes(r.records), r.high_watermark, r.log_start_offset)


def test_a_follower_at_the_log_end_told_everything_is_quiet(pair: tuple[Partition, Partition]) -> None:
    leader, follower = pair
    leader.append(_batch(3), AppendOrigin.CLIENT)
    follower_fetch(leader, follower)
    follower_fetch(leader, follower)  # the HW moves to 3 on this one
    told = told_now(leader)
    assert check(leader, fp(leader, 3), told, replica=True)
    # records to read, a moved HW / log start, what the client was never told: all news
    assert not check(leader, fp(leader, 1), told, replica=True)
    assert not check(leader, fp(leader, 3), Told(2, 2, 0), replica=True)
    assert not check(leader, fp(leader, 3), Told(3, 3, 1), replica=True)
    assert not check(leader, fp(leader, 3), Told(), replica=True)
    leader.append(_batch(1), AppendOrigin.CLIENT)
    assert not check(leader, fp(leader, 3), told, replica=True)


def test_errors_and_divergence_are_never_quiet(pair: tuple[Partition, Partition]) -> None:
    leader, follower = pair
    leader.append(_batch(3), AppendOrigin.CLIENT)
    told = told_now(leader)
    assert not check(leader, fp(leader, 3, epoch=leader.leader_epoch - 1), told, replica=True)  # fenced
    assert not check(leader, fp(leader, 3, epoch=leader.leader_epoch + 1), told, replica=True)  # unknown
    assert not check(leader, fp(leader, 9), told, replica=True)  # out of range
    assert not check(leader, fp(leader, 3, last_fetched=leader.leader_epoch + 5), told, replica=True)  # diverging
    assert not check(follower, fp(follower, 0), told_now(follower), replica=True)  # not the leader
    assert not check(follower, fp(follower, 0), told_now(follower), replica=False)


def test_consumers_are_quiet_at_their_bound(pair: tuple[Partition, Partition]) -> None:
    leader, follower = pair
    leader.append(_batch(2), AppendOrigin.CLIENT)
    leader.append(_batch(1, pid=7, transactional=True), AppendOrigin.CLIENT, transactional=True)  # open: LSO 2
    follower_fetch(leader, follower)
    follower_fetch(leader, follower)
    assert (leader.high_watermark, leader.last_stable_offset) == (3, 2)
    told = told_now(leader)
    committed = Isolation.READ_COMMITTED
    assert check(leader, fp(leader, 2), told, replica=False, isolation=committed)
    assert not check(leader, fp(leader, 1), told, replica=False, isolation=committed)
    assert not check(leader, fp(leader, 2), told, replica=False)  # read_uncommitted reads the open record
    assert check(leader, fp(leader, 3), told, replica=False)
    assert not check(leader, fp(leader, 3), Told(3, 3, 0), replica=False)  # the LSO it was told moved
