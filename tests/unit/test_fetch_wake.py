"""A fetch parked on every partition of its session and woken by one of them reads that one
again, not all of them (broker/apis/fetch.py `_collect` with `again`): a follower's session holds
every partition it follows from this leader, and each acks=all round trip wakes its fetch for
one. What it answers must be exactly what reading every partition again would answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from broker.apis.fetch import _collect
from broker.context import BrokerContext
from broker.partition import AppendOrigin, Partition
from broker.partition.replica_state import Assignment
from protocol.clock import ManualClock
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, FetchRequest
from protocol.records import Record, build_batch
from storage.config import LogConfig

N = 6


@pytest.fixture
def leaders(tmp_path: Path) -> Iterator[list[Partition]]:
    clock = ManualClock(1_000_000_000)
    parts = [Partition.open(tmp_path, "t", i, LogConfig(), 1, clock) for i in range(N)]
    for p in parts:
        p.become_leader(Assignment((1,), frozenset({1}), 1, 0, 0))
        p.append(build_batch([Record(0, 0, None, b"old")]), AppendOrigin.CLIENT)
    yield parts
    for p in parts:
        p.close()


def _ctx(parts: list[Partition]) -> BrokerContext:
    topic = SimpleNamespace(name="t", local={p.index: p for p in parts})
    topics = SimpleNamespace(get=lambda name: topic if name == "t" else None, by_id={},
                             missing=lambda name, index: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return cast(BrokerContext, SimpleNamespace(topics=topics))


def _wanted(parts: list[Partition]) -> list[tuple[tuple[Any, int], FetchPartition]]:
    wanted: list[tuple[tuple[Any, int], FetchPartition]] = [
        (("t", p.index), FetchPartition(partition=p.index, fetch_offset=p.log_end_offset, current_leader_epoch=0,
                                        partition_max_bytes=1 << 20)) for p in parts]
    wanted.append((("gone", 0), FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)))
    return wanted


def test_a_woken_fetch_reads_only_what_moved_and_answers_as_a_full_read(
        leaders: list[Partition], monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, wanted = _ctx(leaders), _wanted(leaders)
    req = FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, topics=[])
    before = _collect(ctx, req, 12, wanted)
    assert before.total == 0 and not before.failed and len(before.watched()) == N
    leaders[4].append(build_batch([Record(0, 0, None, b"new")]), AppendOrigin.CLIENT)
    reads: list[int] = []
    real = Partition.read
    monkeypatch.setattr(Partition, "read", lambda self, *a: (reads.append(self.index), real(self, *a))[1])
    again = _collect(ctx, req, 12, wanted, again=before, changed=[leaders[4]])
    assert reads == [4]
    assert again.total > 0
    full = _collect(ctx, req, 12, wanted)
    assert again.listed(wanted) == full.listed(wanted)
    assert [key for key, _ in again.listed(wanted)] == [key for key, _ in wanted]  # every slot, in order
