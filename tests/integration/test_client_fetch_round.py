"""The bundled consumer's fetch rounds against a real broker: no fetch goes to a node while the
application has yet to take some of that node's records (client/fetcher.py `_fetch_round`).

Before, the round after a partial take fetched the partitions taken so far; when those had nothing
new, the fetch parked at the broker for max_wait_ms and held the node (one fetch in flight per
node) while the rest was taken: whether that happened hung on one loop turn of the fetch loop's
wake-up, and bench.client's consume fell from ~480k to ~20k msg/s when that turn went (993bba9)."""

from __future__ import annotations

import asyncio

from helpers import BrokerProcess, unique_topic
from helpers.wait import wait_until_async

from client import Admin, Consumer, Producer, TopicPartition


async def test_no_fetch_while_a_node_still_holds_untaken_records(broker: BrokerProcess) -> None:
    topic = unique_topic("fetch-round")
    async with Admin(broker.bootstrap) as admin:
        await admin.create_topic(topic, 2)
    quiet, busy = TopicPartition(topic, 0), TopicPartition(topic, 1)
    async with Producer(broker.bootstrap) as p:
        await asyncio.gather(*[await p.send(topic, b"v%d" % i, partition=busy.partition) for i in range(50)])
        await (await p.send(topic, b"q", partition=quiet.partition))
    async with Consumer(broker.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=5_000) as c:
        c.assign([quiet, busy])
        fetcher = c._fetcher
        await wait_until_async(lambda: quiet in fetcher.buffer and busy in fetcher.buffer and not fetcher._in_flight,
                               timeout=30, message="both partitions' records buffered")
        taken = await c.getmany(quiet, max_records=1, timeout_ms=1_000)  # the quiet partition only
        assert [r.value for r in taken[quiet]] == [b"q"]
        assert busy in fetcher.buffer
        for _ in range(20):  # the fetch loop has every chance to send a round
            await asyncio.sleep(0)
            assert not fetcher._in_flight, "a fetch for the quiet partition went out while busy's records wait"
        got = await c.getmany(busy, max_records=100, timeout_ms=1_000)
        assert len(got[busy]) == 50
        # everything taken: the next round goes out (and parks at the broker: nothing new)
        await wait_until_async(lambda: bool(fetcher._in_flight), timeout=10, message="the next fetch round")
