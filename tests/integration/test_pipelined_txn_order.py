"""A parked transaction-coordinator request holds back what follows it on the connection
(issue 11, item 9).

AddPartitionsToTxn may park in the coordinator (waiting for the previous transaction's markers,
or for its log to be durable). A produce pipelined behind it on the same connection must not be
processed until it is done: the produce is for the partition being added, and Kafka, which
processes a connection's requests one at a time, would never let it overtake. The broker runs in
this process so the test can hold the coordinator request and see what the broker does meanwhile;
the requests arrive over TCP, byte for byte.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import free_port, unique_topic
from helpers.txn import RawTxn, txn_batch

from broker.apis import HANDLERS
from broker.config import BrokerConfig
from broker.server import BrokerServer
from protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
)
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData

PRODUCE, ADD_PARTITIONS = 0, 24


class Hold:
    """Wraps the two handlers: records when each starts and ends; AddPartitionsToTxn waits at
    the gate once `armed`."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []
        self.armed = False
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()


@pytest.fixture
def hold(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hold]:
    h = Hold()
    for key in (PRODUCE, ADD_PARTITIONS):
        handler = HANDLERS[key]

        async def wrapped(ctx: Any, info: Any, header: Any, req: Any, handler: Any = handler, key: int = key) -> Any:
            h.events.append(("start", key))
            if key == ADD_PARTITIONS and h.armed:
                h.entered.set()
                await h.gate.wait()
            resp = await handler(ctx, info, header, req)
            h.events.append(("end", key))
            return resp

        monkeypatch.setitem(HANDLERS, key, wrapped)
    yield h


async def test_produce_behind_a_parked_add_partitions_waits_for_it(tmp_path: Path, hold: Hold) -> None:
    port = free_port()
    server = BrokerServer(BrokerConfig(listen=f"127.0.0.1:{port}", data_dir=str(tmp_path / "data"),
                                       inter_broker_listen=f"127.0.0.1:{free_port()}"))
    await server.start()
    raw = RawTxn(port)
    try:
        topic, tid = unique_topic("order"), "pipelined"

        def begin() -> tuple[int, int]:
            raw.create_topic(topic, 2)
            pid, epoch = raw.init_ok(tid)
            assert raw.add_partitions(tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
            assert raw.produce(topic, 0, txn_batch(pid, epoch, 0), tid)[0] == 0
            return pid, epoch

        pid, epoch = await asyncio.to_thread(begin)
        hold.events.clear()
        hold.armed = True
        add = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=[1])])
        produce = ProduceRequest(transactional_id=tid, acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
            name=topic, partition_data=[PartitionProduceData(index=1, records=txn_batch(pid, epoch, 1))])])
        raw.send_pipelined([(add, 3), (produce, 7)])

        await asyncio.wait_for(hold.entered.wait(), 10)
        conn = next(c for c in server.connections if c.tasks)
        deadline = asyncio.get_running_loop().time() + 10
        while len(conn.slots) < 2:  # both requests read and dispatched
            assert asyncio.get_running_loop().time() < deadline, "the produce never reached the broker"
            await asyncio.sleep(0)
        for _ in range(3):  # a task created by the dispatch takes its first step within these turns
            await asyncio.sleep(0)
        assert hold.events == [("start", ADD_PARTITIONS)], hold.events  # the produce has not started

        hold.gate.set()

        def answers() -> tuple[Any, Any]:
            return raw.receive(AddPartitionsToTxnRequest, 3)[1], raw.receive(ProduceRequest, 7)[1]

        added, produced = await asyncio.to_thread(answers)
        assert isinstance(added, AddPartitionsToTxnResponse) and isinstance(produced, ProduceResponse)
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        assert produced.responses[0].partition_responses[0].error_code == 0
        assert hold.events == [("start", ADD_PARTITIONS), ("end", ADD_PARTITIONS), ("start", PRODUCE),
                               ("end", PRODUCE)]
    finally:
        raw.close()
        await server.stop()
