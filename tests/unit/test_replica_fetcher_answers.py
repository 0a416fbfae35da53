"""What the replica fetcher does with a leader's answer (ReplicaFetcher._apply), on real
partitions without sockets: an answer with nothing new — the leader's long poll ran out, or an
incremental answer listing nothing — is fetched after at once; only partition errors, which the
leader answers without waiting, make the follower pause before the next fetch."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.wait import wait_until_async

from broker.partition import Partition
from broker.partition.replica_state import Assignment
from broker.replication.fetcher import ReplicaFetcher
from broker.replication.follower_session import FetchPlan
from protocol.clock import ManualClock
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from storage.config import LogConfig

TOPIC_ID = uuid.UUID(int=7)


@pytest.fixture
def follower(tmp_path: Path) -> Iterator[Partition]:
    a = Assignment((1, 2), frozenset((1, 2)), 1, 3, 0)
    p = Partition.open(tmp_path, "t", 0, LogConfig(), 2, ManualClock(1_000_000))
    p.become_follower(a)
    yield p
    p.close()


def answer(*parts: PartitionData) -> FetchResponse:
    return FetchResponse(session_id=5, responses=[FetchableTopicResponse(topic_id=TOPIC_ID, partitions=list(parts))]
                         if parts else [])


def data(error: int = 0) -> PartitionData:
    return PartitionData(partition_index=0, error_code=error, high_watermark=0, last_stable_offset=0,
                         log_start_offset=0, records=b"")


def apply(follower: Partition, resp: FetchResponse) -> bool:
    fetcher = ReplicaFetcher(2, lambda n: None, lambda t: TOPIC_ID)
    backoff, _ = fetcher._apply(resp, {("t", 0): follower}, set())
    return backoff


def test_an_answer_with_nothing_new_is_fetched_after_at_once(follower: Partition) -> None:
    assert not apply(follower, answer(data()))  # the long poll ran out: the HW as it was, no records
    assert not apply(follower, answer())  # an incremental answer with nothing to say


def test_an_answer_with_only_errors_makes_the_follower_pause(follower: Partition) -> None:
    assert apply(follower, answer(data(ErrorCode.NOT_LEADER_OR_FOLLOWER)))
    assert apply(follower, answer(data(ErrorCode.FENCED_LEADER_EPOCH)))


class _Leader:
    """What _request asks of a connection: the Fetch version the leader speaks."""

    def version_for(self, _: object) -> int:
        return 17


def test_every_fetch_states_the_follower_brokers_registration_epoch() -> None:
    """KIP-903: the leader names an ISR member with the broker epoch its fetches stated
    (ReplicaState.member_epochs), so the fetch must carry it (-1 before the broker registered)."""
    epoch: list[int | None] = [None]
    fetcher = ReplicaFetcher(2, lambda n: None, lambda t: TOPIC_ID, broker_epoch=lambda: epoch[0])
    plan = FetchPlan(session_id=0, epoch=0, send={}, forget=[], wanted={})
    assert fetcher._request(plan, _Leader()).replica_state.replica_epoch == -1  # type: ignore[arg-type]
    epoch[0] = 42
    req = fetcher._request(plan, _Leader())  # type: ignore[arg-type]
    assert (req.replica_state.replica_id, req.replica_state.replica_epoch) == (2, 42)


async def test_stop_ends_a_loop_woken_in_the_same_turn(follower: Partition, tmp_path: Path) -> None:
    """A partition joins a leader's loop (metadata applied while the broker stops) in the same turn
    of the event loop as stop() cancels it: on Python 3.11 asyncio.wait_for returns the woken wait
    and the cancellation is lost, so a loop that only ends by being cancelled fetched on and stop()
    never returned (brokers SIGKILLed 20 s after SIGTERM in the parallel suite)."""
    asked: list[int] = []

    def address_of(node: int) -> None:  # the leader cannot be reached: the loop waits to retry
        asked.append(node)

    fetcher = ReplicaFetcher(2, address_of, lambda t: TOPIC_ID)
    fetcher.follow(follower)
    await wait_until_async(lambda: asked, message="the loop to look for its leader")
    second = Partition.open(tmp_path / "second", "t", 1, LogConfig(), 2, ManualClock(1_000_000))
    stopping: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    try:
        second.become_follower(Assignment((1, 2), frozenset((1, 2)), 1, 3, 0))
        # stop() first: its cancel and the wake below land in one turn, the cancel before the
        # woken loop resumes (the wake alone would let the loop run on before stop() starts)
        stopping = asyncio.ensure_future(fetcher.stop())
        fetcher.follow(second)  # wakes the waiting loop in the turn that cancels it
        done, _ = await asyncio.wait([stopping], timeout=5)  # (wait_for would cancel stop(), which ends it)
        assert done, f"stop() still waits on a loop that fetches on ({len(asked)} tries)"
        assert asked == [1], "the loop tried its leader again after stop()"
    finally:
        stopping.cancel()
        second.close()
