"""The batch-atomic protocol without Spark, against a broker that allows 2PC: a driver that dies at
each step of its commit (here: an exception out of the step, its producers closed without ending
anything, as a SIGKILL leaves them), the micro-batch replayed as Spark replays it after a restart,
and what a read_committed reader sees meanwhile: nothing of the batch until all of it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from atomic_support import ALLOW_2PC, gate_offsets
from helpers import BrokerProcess
from pipeline_support import create_topics, read_committed

from client import PreparedTransaction, Producer, TopicPartition
from pipeline import atomic
from pipeline.exactly_once import TaskOutcome, TaskWrite, write_once
from pipeline.options import SinkOptions, sink_options
from pipeline.records_out import OutRecord

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker_2pc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker that allows 2PC for the module (each test has its own topic, query and gate)."""
    base = tmp_path_factory.mktemp("broker-2pc")
    b = BrokerProcess(base / "data", env=ALLOW_2PC, log_path=base / "broker.log")
    b.start(30)
    yield b
    died = b.died_unexpectedly()
    b.close()
    assert not died, f"the broker died during the tests:\n{b.log_tail()}"


def _query(topic: str) -> str:
    return f"query-{topic}"


class DriverDied(Exception):
    pass


def _sink(bootstrap: str, topic: str) -> SinkOptions:
    return sink_options({"kafka.bootstrap.servers": bootstrap, "topic": topic, "commitMode": "batch-atomic",
                         "checkpointLocation": f"/checkpoints/{topic}"})


def _records(topic: str, tag: str, n: int) -> list[OutRecord]:
    return [OutRecord(topic, f"{tag}-{i}".encode(), f"{tag}-{i}".encode(), None, ()) for i in range(n)]


async def _task(sink: SinkOptions, who: TaskWrite, records: Sequence[OutRecord]) -> TaskOutcome:
    """One task attempt, as the sink runs it: begin, send, prepare (or a replay's shortcut)."""
    out = await atomic.begin(sink, who)
    if isinstance(out, TaskOutcome):
        return out
    await out.send_records(records)
    return await out.finish()


async def _batch(sink: SinkOptions, batch: int, tag: str, n: int = 40) -> list[atomic.TaskReport]:
    reports = []
    for p in (0, 1):
        outcome = await _task(sink, TaskWrite(_query(sink.topic or ""), batch, p), _records(sink.topic or "", f"{tag}-b{batch}-t{p}", n))
        reports.append(atomic.TaskReport(p, outcome.token))
    return reports


def _tokens(reports: Sequence[atomic.TaskReport]) -> list[PreparedTransaction]:
    return [r.token for r in reports if r.token is not None]


def _dies_at(point: str) -> atomic.Reached:
    def reached(at: str) -> None:
        if at == point:
            raise DriverDied(at)
    return reached


async def _visible(bootstrap: str, topic: str) -> list[bytes]:
    return sorted(r.value or b"" for r in await read_committed(bootstrap, topic))


def _expected(topic: str, tag: str, batch: int, n: int = 40) -> list[bytes]:
    return sorted(r.value or b"" for p in (0, 1) for r in _records(topic, f"{tag}-b{batch}-t{p}", n))


async def test_a_driver_dead_between_its_commits_shows_nothing_until_the_restart_completes_the_batch(
        broker_2pc: BrokerProcess, topic: str) -> None:
    b = broker_2pc.bootstrap
    await create_topics(b, [topic])
    sink = _sink(b, topic)
    await atomic.ensure_gate(sink)
    reports = await _batch(sink, 0, "first")
    assert all(r.token is not None for r in reports), "each task prepares its part and reports the token"
    assert await _visible(b, topic) == []

    with pytest.raises(DriverDied):
        await atomic.commit_batch(sink, _query(topic), 0, reports, _dies_at("completed"))
    assert await atomic.decided_batch(sink, _query(topic)) == 0
    assert await _visible(b, topic) == [], "one task's transaction is committed, but the gate holds it back"

    # The restart: the gate is still open and kept; Spark replays batch 0. The task whose
    # transaction was committed skips; the other hands its prepared transaction over, unchanged.
    await atomic.ensure_gate(sink)
    again = await _batch(sink, 0, "second")
    assert sorted(r.token is None for r in again) == [False, True]
    assert [r.token for r in again if r.token is not None][0] in [r.token for r in reports]
    await atomic.commit_batch(sink, _query(topic), 0, again)
    assert await _visible(b, topic) == _expected(topic, "first", 0)

    # The next batch goes through whole.
    await atomic.ensure_gate(sink)
    await atomic.commit_batch(sink, _query(topic), 1, await _batch(sink, 1, "first"))
    assert await _visible(b, topic) == sorted(_expected(topic, "first", 0) + _expected(topic, "first", 1))


async def test_a_driver_dead_before_deciding_leaves_a_batch_its_restart_writes_again_once(
        broker_2pc: BrokerProcess, topic: str) -> None:
    b = broker_2pc.bootstrap
    await create_topics(b, [topic])
    sink = _sink(b, topic)
    await atomic.ensure_gate(sink)
    with pytest.raises(DriverDied):
        await atomic.commit_batch(sink, _query(topic), 0, await _batch(sink, 0, "first"), _dies_at("taken over"))
    assert await atomic.decided_batch(sink, _query(topic)) is None

    await atomic.ensure_gate(sink)
    again = await _batch(sink, 0, "second")
    assert all(r.token is not None for r in again), "undecided: each task aborts its old attempt and writes anew"
    await atomic.commit_batch(sink, _query(topic), 0, again)
    assert await _visible(b, topic) == _expected(topic, "second", 0)


async def test_abort_ends_an_undecided_batch_and_leaves_a_decided_one_to_the_restart(
        broker_2pc: BrokerProcess, topic: str) -> None:
    b = broker_2pc.bootstrap
    await create_topics(b, [topic])
    sink = _sink(b, topic)
    await atomic.ensure_gate(sink)
    await atomic.abort_batch(sink, _query(topic), 0, _tokens(await _batch(sink, 0, "failed")))
    tps = [TopicPartition(topic, p) for p in (0, 1)]
    async with Producer(b) as probe:  # a plain write after the abort: readable at once (no gate, nothing open)
        for tp in tps:
            await probe.send(topic, b"after-abort", partition=tp.partition)
    assert await _visible(b, topic) == [b"after-abort", b"after-abort"]

    await atomic.ensure_gate(sink)
    reports = await _batch(sink, 0, "decided")
    with pytest.raises(DriverDied):
        await atomic.commit_batch(sink, _query(topic), 0, reports, _dies_at("decided"))
    await atomic.abort_batch(sink, _query(topic), 0, _tokens(reports))  # Spark aborts after a failed commit: B stays decided
    assert await _visible(b, topic) == [b"after-abort", b"after-abort"]
    await atomic.ensure_gate(sink)
    await atomic.commit_batch(sink, _query(topic), 0, await _batch(sink, 0, "replay"))
    assert await _visible(b, topic) == sorted([b"after-abort"] * 2 + _expected(topic, "decided", 0))


async def test_a_gate_whose_opening_was_cut_short_is_replaced(broker_2pc: BrokerProcess, topic: str) -> None:
    b = broker_2pc.bootstrap
    await create_topics(b, [topic])
    sink = _sink(b, topic)
    # A driver killed while opening the gate: its record reached partition 0 only.
    cut = Producer(b, transactional_id=atomic.gate_id(sink), enable_2pc=True)
    await cut.start()
    await cut.init_transactions()
    await cut.begin_transaction()
    await cut.send(topic, b"", partition=0, headers=[(atomic.GATE_HEADER, b"")])
    await cut.flush()
    await cut.close()

    await atomic.ensure_gate(sink)
    gates = await gate_offsets(b, topic, 2)
    assert len(gates[0]) == 2 and len(gates[1]) == 1, f"a new gate over both partitions: {gates}"
    await atomic.commit_batch(sink, _query(topic), 0, await _batch(sink, 0, "first"))
    assert await _visible(b, topic) == _expected(topic, "first", 0)


async def test_a_batch_a_task_committed_in_per_task_mode_is_not_written_again_in_batch_atomic_mode(
        broker_2pc: BrokerProcess, topic: str) -> None:
    b = broker_2pc.bootstrap
    await create_topics(b, [topic])
    per_task = sink_options({"kafka.bootstrap.servers": b, "topic": topic})
    await write_once(per_task, TaskWrite(_query(topic), 0, 0), _records(topic, "first-b0-t0", 40))
    # The query restarts in batch-atomic mode and replays batch 0 (its commit-log entry was missing).
    sink = _sink(b, topic)
    await atomic.ensure_gate(sink)
    reports = await _batch(sink, 0, "first")
    assert [r.token is None for r in reports] == [True, False]
    await atomic.commit_batch(sink, _query(topic), 0, reports)
    assert await _visible(b, topic) == _expected(topic, "first", 0)
