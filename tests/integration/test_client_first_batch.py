"""The bundled client's first batch of a producer epoch in a partition goes alone.

Until a partition has acknowledged one batch of the producer's current id and epoch, its leader
may not know the producer, and an unknown producer's first batch is accepted at any sequence
(KIP-360: its state may have expired). A later batch pipelined behind a first one that fails
retriably (the partition not yet on its new leader, NOT_LEADER_OR_FOLLOWER) would then be
appended first, and the first one's retry refused OUT_OF_ORDER_SEQUENCE_NUMBER, which ends a
transaction. It did, for Spark sink tasks writing to a topic created just before the query on
three brokers. The broker runs in this process so the test can make that first answer slow and
retriable; the client talks to it over TCP.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import free_port, unique_topic

from broker.apis import HANDLERS
from broker.config import BrokerConfig
from broker.server import BrokerServer
from client import Admin, Consumer, Producer, TopicPartition
from protocol.errors import ErrorCode
from protocol.messages.produce import PartitionProduceResponse, ProduceResponse, TopicProduceResponse

PRODUCE = 0
SLOW_ANSWER_S = 2.0  # how long the first produce's answer may take: long enough for a pipelining
# client to send its next batches meanwhile; a client that waits for it sends nothing before it


class FirstProduceRefused:
    """The first transactional produce is answered NOT_LEADER_OR_FOLLOWER (nothing appended), once
    a second produce has reached the broker or SLOW_ANSWER_S passed; every other goes through."""

    def __init__(self) -> None:
        self.seen = 0
        self.first = asyncio.Event()
        self.second = asyncio.Event()


@pytest.fixture
def refuse_first(monkeypatch: pytest.MonkeyPatch) -> Iterator[FirstProduceRefused]:
    r = FirstProduceRefused()
    handler = HANDLERS[PRODUCE]

    async def wrapped(ctx: Any, info: Any, header: Any, req: Any) -> Any:
        if req.transactional_id is None:
            return await handler(ctx, info, header, req)
        r.seen += 1
        r.first.set()
        if r.seen == 2:
            r.second.set()
        if r.seen != 1:
            return await handler(ctx, info, header, req)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(r.second.wait(), SLOW_ANSWER_S)
        return ProduceResponse(responses=[TopicProduceResponse(name=t.name, partition_responses=[
            PartitionProduceResponse(index=p.index, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER, base_offset=-1)
            for p in t.partition_data]) for t in req.topic_data], throttle_time_ms=0)

    monkeypatch.setitem(HANDLERS, PRODUCE, wrapped)
    yield r


async def test_a_later_batch_is_not_sent_before_the_first_batch_of_its_epoch_landed(
        tmp_path: Path, refuse_first: FirstProduceRefused) -> None:
    port = free_port()
    server = BrokerServer(BrokerConfig(listen=f"127.0.0.1:{port}", data_dir=str(tmp_path / "data"),
                                       inter_broker_listen=f"127.0.0.1:{free_port()}"))
    await server.start()
    bootstrap = f"127.0.0.1:{port}"
    topic = unique_topic("first-batch")
    try:
        async with Admin(bootstrap) as admin:
            await admin.create_topic(topic, 1)
        async with Producer(bootstrap, transactional_id="first-batch", batch_size=1024, linger_ms=0,
                            retry_backoff_ms=20) as p:
            await p.init_transactions()
            await p.begin_transaction()
            futs = [await p.send(topic, b"%03d" % i + b"." * 200, partition=0) for i in range(10)]
            await asyncio.wait_for(refuse_first.first.wait(), 10)  # the first batch is at the broker
            futs += [await p.send(topic, b"%03d" % i + b"." * 200, partition=0) for i in range(10, 40)]
            await asyncio.wait_for(asyncio.gather(*futs), 30)
            await p.commit_transaction()
        assert refuse_first.seen >= 2
        async with Consumer(bootstrap, isolation_level="read_committed", enable_auto_commit=False) as c:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            got: list[bytes] = []
            while len(got) < 40:
                batch = await c.getmany(tp, timeout_ms=5000)
                assert batch, f"only {len(got)} of 40 records"
                got += [r.value[:3] for r in batch[tp] if r.value is not None]
        assert got == [b"%03d" % i for i in range(40)]
    finally:
        await server.stop()
