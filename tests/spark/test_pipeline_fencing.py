"""The sink's per-task protocol without Spark: fencing of a leftover attempt, marker skips, and the
producers a worker keeps between micro-batches (reused only while nobody else has initialised them)."""

from __future__ import annotations

import asyncio

import pytest
from pipeline_support import create_topics, read_committed

from client import Producer, ProducerFencedError
from pipeline import exactly_once
from pipeline.exactly_once import TaskClients, TaskWrite, close_clients, write_once
from pipeline.options import sink_options
from pipeline.records_out import OutRecord
from pipeline.runtime import ClientCache


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



def _values(records: list, tag: str) -> list[bytes]:
    return sorted(r.value for r in records if r.value.startswith(tag.encode()))


async def test_a_kept_producer_serves_the_next_batch_and_is_renewed_once_fenced(module_broker, topic: str) -> None:
    b = module_broker.bootstrap
    await create_topics(b, [topic])
    sink = sink_options({"kafka.bootstrap.servers": b, "topic": topic})
    cache: ClientCache[TaskClients] = ClientCache(close_clients)
    batch = lambda n: TaskWrite("query-2", batch_id=n, partition_id=0)  # noqa: E731

    await write_once(sink, batch(1), _records(topic, "b1", 5), cache)
    [kept] = cache.idle()
    first = kept.producer
    await write_once(sink, batch(2), _records(topic, "b2", 5), cache)
    assert cache.idle() == [kept] and kept.producer is first, "the next batch reuses the producer, no new init"

    # Another attempt of the task (another worker) initialises the same id, fencing the kept
    # producer, and dies before writing anything.
    other = Producer(b, transactional_id=batch(3).transactional_id(sink.txn_prefix))
    await other.start()
    await other.init_transactions()
    await other.close()
    third = await write_once(sink, batch(3), _records(topic, "b3", 5), cache)
    assert (third.rows, third.skipped) == (5, False)
    assert cache.idle() == [kept] and kept.producer is not first, "fenced: renewed, never reused"

    # A later batch of the task ran elsewhere: the kept producer is renewed before it is asked.
    await write_once(sink, batch(4), _records(topic, "b4", 5))
    renewed = kept.producer
    fifth = await write_once(sink, batch(5), _records(topic, "b5", 5), cache)
    assert not fifth.skipped and kept.producer is not renewed
    replay = await write_once(sink, batch(5), _records(topic, "again", 5), cache)
    assert replay.skipped

    got = await read_committed(b, topic)
    for n in range(1, 6):
        assert _values(got, f"b{n}") == sorted(f"b{n}-{i}".encode() for i in range(5))
    assert not _values(got, "again")
    await cache.close()


async def test_a_kept_producer_does_not_wait_out_an_open_transaction_of_another_attempt(
        module_broker, topic: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exactly_once, "KEPT_MARKER_WAIT_S", 1.0)
    b = module_broker.bootstrap
    await create_topics(b, [topic])
    sink = sink_options({"kafka.bootstrap.servers": b, "topic": topic, "transactionTimeoutMs": "120000"})
    cache: ClientCache[TaskClients] = ClientCache(close_clients)
    await write_once(sink, TaskWrite("query-3", 1, 0), _records(topic, "b1", 3), cache)

    # Another attempt of batch 2 got as far as its marker and some records, then hung: its marker
    # is pending in a transaction that would stay open for two minutes.
    who = TaskWrite("query-3", 2, 0)
    zombie = await exactly_once.begin(sink, who)
    assert zombie is not None
    await zombie.send_records(_records(topic, "zombie", 4))
    await zombie.producer.flush()

    mine = await asyncio.wait_for(write_once(sink, who, _records(topic, "b2", 3), cache), 20)  # not 30 s
    assert (mine.rows, mine.skipped) == (3, False)
    with pytest.raises(ProducerFencedError):
        await zombie.producer.commit_transaction()
    await zombie.fail()
    got = await read_committed(b, topic)
    assert _values(got, "b2") == sorted(f"b2-{i}".encode() for i in range(3)) and not _values(got, "zombie")
    await cache.close()
