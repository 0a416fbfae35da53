"""Issue 24, found by the fuzzer (docs/security.md "Front-door limits and fuzzing"): a topic of
514 partitions made the broker open every new partition log — directories created and fsynced —
on its event loop while it applied the metadata image, a stall of seconds (11-14 s under the
fuzzer's load: longer than the broker's session, so it was fenced, and SIGTERM went unanswered).
The logs now open on the log directory's I/O thread: the loop watch (broker/loop_watch.py) must
count no stall of a second or more over the creation, the broker must stay unfenced, and every
new partition must take records once open; deleting the topic then removes the logs off the
loop as well."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from helpers import BrokerProcess, free_port, unique_topic, wait_until
from helpers.metrics import HOST, Metrics

from client import Admin, Producer

PARTITIONS = 514  # the fuzzer's count


@pytest.fixture
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Metrics]]:
    port = free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("many") / "data", env={"KETCH_METRICS_LISTEN": f"{HOST}:{port}"},
                      log_path=tmp_path_factory.mktemp("many-log") / "broker.log")
    b.start()
    yield b, Metrics(port)
    b.stop()


async def _create_and_produce(bs: str, topic: str) -> None:
    async with Admin(bs) as admin:
        await admin.create_topic(topic, 2)
        await admin.create_partitions({topic: PARTITIONS})  # the fuzzer's CreatePartitions
    async with Producer(bs, acks=-1) as p:
        for i in (0, 1, 2, PARTITIONS // 2, PARTITIONS - 1):
            await p.send(topic, b"v", partition=i)
        await p.flush()


async def _delete(bs: str, topic: str) -> None:
    async with Admin(bs) as admin:
        await admin.delete_topic(topic)


def test_hundreds_of_new_partitions_open_without_stalling_the_loop(metered: tuple[BrokerProcess, Metrics]) -> None:
    b, m = metered
    wait_until(lambda: m.value("ketch_brokers", state="alive") == 1, timeout=15, message="this broker registered")
    stalls = m.value("ketch_event_loop_stalls_total")
    topic = unique_topic("many")
    asyncio.run(_create_and_produce(b.bootstrap, topic))
    after = m.scrape()
    assert after[("ketch_event_loop_stalls_total", frozenset())] == stalls, b.log_tail()
    assert after[("ketch_brokers", frozenset({("state", "fenced")}))] == 0
    for i in (0, PARTITIONS // 2, PARTITIONS - 1):
        labels = frozenset({("topic", topic), ("partition", str(i))})
        assert after[("ketch_partition_high_watermark", labels)] == 1
    # and deleting it closes and removes every log off the loop too (5.2 s on the loop before)
    asyncio.run(_delete(b.bootstrap, topic))
    wait_until(lambda: not list(b.data_dir.glob(f"{topic}-*")), timeout=60, message="the logs removed")
    after = m.scrape()
    assert after[("ketch_event_loop_stalls_total", frozenset())] == stalls, b.log_tail()
    assert after[("ketch_brokers", frozenset({("state", "fenced")}))] == 0
