"""The sink's per-task protocol without Spark: fencing of a leftover attempt, and marker skips."""

from __future__ import annotations

import pytest
from pipeline_support import create_topics, read_committed

from client import Producer, ProducerFencedError
from pipeline.exactly_once import TaskWrite, write_once
from pipeline.options import sink_options
from pipeline.records_out import OutRecord


def _records(topic: str, tag: str, n: int) -> list[OutRecord]:
    return [OutRecord(topic, b"k%d" % i, f"{tag}-{i}".encode(), None, ()) for i in range(n)]


async def test_a_leftover_attempt_is_fenced_and_a_replay_is_skipped(module_broker, topic: str) -> None:
    b = module_broker.bootstrap
    await create_topics(b, [topic])
    sink = sink_options({"kafka.bootstrap.servers": b, "topic": topic})
    who = TaskWrite("query-1", batch_id=4, partition_id=1)

    # A failed attempt of the same task: it wrote records and never committed (its executor hung).
    zombie = Producer(b, transactional_id=who.transactional_id(sink.txn_prefix))
    await zombie.start()
    await zombie.init_transactions()
    await zombie.begin_transaction()
    for r in _records(topic, "zombie", 30):
        await zombie.send(r.topic, r.value, key=r.key)
    await zombie.flush()

    first = await write_once(sink, who, _records(topic, "attempt2", 50))
    assert (first.rows, first.skipped) == (50, False)
    with pytest.raises(ProducerFencedError):
        await zombie.commit_transaction()
    await zombie.close()

    again = await write_once(sink, who, _records(topic, "attempt3", 50))  # Spark replays the batch
    assert again.skipped
    older = await write_once(sink, TaskWrite("query-1", 3, 1), _records(topic, "old", 5))
    assert older.skipped, "a batch before the marker is committed already"
    other_task = await write_once(sink, TaskWrite("query-1", 4, 0), _records(topic, "task0", 7))
    assert not other_task.skipped, "markers are per task"

    got = sorted(r.value for r in await read_committed(b, topic))
    assert got == sorted([f"attempt2-{i}".encode() for i in range(50)] + [f"task0-{i}".encode() for i in range(7)])

