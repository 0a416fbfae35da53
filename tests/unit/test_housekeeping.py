"""Compaction runs off the event loop: the loop keeps serving while a pass is in its worker
thread, what was appended meanwhile survives the swap, and a pass whose log changed under it is
thrown away instead of swapped in. Retention unlinks off the loop too, and wakes the fetches it
leaves below the log start."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from helpers.coordinator_cluster import ME, Cluster, until

from broker import housekeeping
from broker.apis import fetch
from broker.config import BrokerConfig
from broker.context import BrokerContext, ClientInfo
from broker.log_io import LogIO
from broker.partition import AppendOrigin, Isolation, Partition
from broker.partition.replica_state import Assignment
from broker.topics import TopicTable
from protocol.clock import ManualClock, SystemClock
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.records import Record, build_batch, decode_batches
from storage import cleaner, segment_swap
from storage.config import LogConfig
from storage.fs import FileSystem

KEYS = 20
NOW = 1_000_000


def _open(path: Path, policy: str = "compact") -> Partition:
    cfg = LogConfig(segment_bytes=4096, cleanup_policy=policy, min_cleanable_dirty_ratio=0.0)
    p = Partition.open(path, "c", 0, cfg, 1, ManualClock(NOW))
    p.become_leader(Assignment((1,), frozenset({1}), 1, 0, 0))
    return p


def _put(p: Partition, key: int, value: bytes) -> None:
    p.append(build_batch([Record(0, 0, b"k%d" % key, value)]), AppendOrigin.CLIENT)


def _fill(p: Partition, rounds: int) -> None:
    for r in range(rounds):
        for k in range(KEYS):
            _put(p, k, b"round-%d" % r)
    p._log.roll()


def _latest(p: Partition) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    offset = p.log_start_offset
    while True:
        r = p.read(offset, 1 << 20, Isolation.READ_UNCOMMITTED)
        if not r.records:
            return out
        for _, records in decode_batches(r.records):
            for rec in records:
                assert rec.key is not None and rec.value is not None
                out[rec.key] = rec.value
        offset = r.next_offset


def _gate(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """Hold cleaner.run (in its worker thread) until the test opens the gate."""
    started, gate = threading.Event(), threading.Event()
    real = cleaner.run

    def gated(job: cleaner.CleanJob) -> cleaner.CleanedSegments:
        started.set()
        assert gate.wait(10), "the test never opened the gate: was the pass run on the loop?"
        return real(job)

    monkeypatch.setattr(cleaner, "run", gated)
    return started, gate


async def _wait(event: threading.Event) -> None:
    deadline = asyncio.get_running_loop().time() + 10
    while not event.is_set():
        assert asyncio.get_running_loop().time() < deadline, "the pass never started"
        await asyncio.sleep(0.001)


async def test_the_loop_appends_while_a_pass_runs_and_the_appends_survive_the_swap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _open(tmp_path / "c-0")
    _fill(p, 30)
    segments_before = p.segment_count
    started, gate = _gate(monkeypatch)
    task = asyncio.create_task(p.compact(NOW))
    await _wait(started)
    # The pass is parked in its thread; the loop is free: these appends happen now.
    for k in range(KEYS):
        _put(p, k, b"during-the-pass")
    assert not task.done()
    gate.set()
    stats = await task
    assert stats.cleaned and stats.records_removed > 0
    assert p.segment_count < segments_before
    assert _latest(p) == {b"k%d" % k: b"during-the-pass" for k in range(KEYS)}
    p.close()


async def test_a_pass_whose_segments_went_away_meanwhile_is_discarded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _open(tmp_path / "c-0", "compact,delete")  # DeleteRecords needs delete in the policy
    _fill(p, 30)
    started, gate = _gate(monkeypatch)
    task = asyncio.create_task(p.compact(NOW))
    await _wait(started)
    # DeleteRecords moves the log start past the first segments: they are deleted under the pass.
    cut = p._log.segments[3].base_offset
    p.delete_records(cut)
    gate.set()
    stats = await task
    assert not stats.cleaned
    assert p.log_start_offset == cut
    assert not segment_swap.staging_dir(p.directory).exists()
    assert _latest(p) == {b"k%d" % k: b"round-29" for k in range(KEYS)}
    # the next pass starts over from the log as it is now, and works
    monkeypatch.undo()
    again = await p.compact(NOW)
    assert again.cleaned and again.records_removed > 0
    assert _latest(p) == {b"k%d" % k: b"round-29" for k in range(KEYS)}
    p.close()


async def test_retention_unlinks_files_in_a_worker_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from broker import partition
    from storage.segment import unlink_all

    threads: list[int] = []

    def recording_unlink(fs: FileSystem, paths: list[Path]) -> None:
        threads.append(threading.get_ident())
        unlink_all(fs, paths)

    monkeypatch.setattr(partition, "unlink_all", recording_unlink)
    cfg = LogConfig(segment_bytes=200, retention_bytes=0)
    p = Partition.open(tmp_path, "r", 0, cfg, 1, ManualClock(NOW))
    p.become_leader(Assignment((1,), frozenset({1}), 1, 0, 0))
    for k in range(10):
        _put(p, k, b"x" * 100)
    files_before = {f.name for f in (tmp_path / "r-0").iterdir()}
    keeper = housekeeping.Housekeeper(None, ManualClock(NOW), 1000, 1000, 1000, io_of=lambda _: LogIO())  # type: ignore[arg-type]
    await keeper.tidy(p, retention_due=True, expiry_due=False)
    assert threads and threading.get_ident() not in threads
    files_after = {f.name for f in (tmp_path / "r-0").iterdir()}
    assert not any(n.endswith(".deleted") for n in files_after)
    assert len([n for n in files_after if n.endswith(".log")]) == 1 < len([n for n in files_before if n.endswith(".log")])
    p.close()


async def test_a_fetch_parked_below_what_retention_deletes_answers_at_once(tmp_path: Path) -> None:
    """A consumer's fetch waiting for more bytes than there are (min_bytes) at offset 0, then
    retention deletes the segments holding offset 0: as after DeleteRecords, the fetch must answer
    OFFSET_OUT_OF_RANGE with the new log start now (Kafka's DelayedFetch completes on an offset out
    of range), not sit out its max_wait_ms and answer then."""
    clock = SystemClock()
    topics = TopicTable(BrokerConfig(data_dir=str(tmp_path), node_id=ME), clock)
    topics.load()
    cluster = Cluster(topics)
    await cluster.image("r", ME, 0, {"segment.bytes": "200", "retention.bytes": "0"}, isr=(ME,))
    p = cluster.partition("r")
    for k in range(10):
        _put(p, k, b"x" * 100)
    assert p.segment_count > 1 and p.high_watermark == 10
    ctx = BrokerContext(ME, topics.cfg, clock, topics, None, None, None, None)  # type: ignore[arg-type]
    req = FetchRequest(max_wait_ms=60_000, min_bytes=1 << 20, topics=[FetchTopic(topic="r", partitions=[
        FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    client = ClientInfo(conn_id=1, peer="127.0.0.1:1", endpoint=("127.0.0.1", 9092))
    parked = asyncio.create_task(fetch.handle(ctx, client, RequestHeader(1, 12, 1, "t"), req))
    try:
        await until(lambda: p._waiters, message="the fetch to park")
        keeper = housekeeping.Housekeeper(topics, clock, 1000, 1000, 1000, io_of=topics.io_of)
        await keeper.tidy(p, retention_due=True, expiry_due=False)
        assert p.log_start_offset > 0
        resp = await asyncio.wait_for(parked, 5)
        pd = resp.responses[0].partitions[0]
        assert (pd.error_code, pd.log_start_offset) == (ErrorCode.OFFSET_OUT_OF_RANGE, p.log_start_offset)
    finally:
        parked.cancel()
        topics.close()
