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


async def test_pipelined_produces_append_in_request_order_whatever_their_verification_waits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two transactional produces pipelined on one connection: the first opens the transaction in
    partitions 0 and 1, the second carries partition 1's next batch. Both wait for the
    coordinator's verification (KIP-890: nothing is appended for the producer there yet); the
    first one's answer comes later (on a cluster: one verify round trip per partition, to another
    broker). The second must still append after the first, as Kafka (one request of a connection
    at a time) would: appended first, its later sequence would take partition 1 and the first
    one's batch there would be refused OUT_OF_ORDER_SEQUENCE_NUMBER, ending the transaction."""
    port = free_port()
    server = BrokerServer(BrokerConfig(listen=f"127.0.0.1:{port}", data_dir=str(tmp_path / "data"),
                                       inter_broker_listen=f"127.0.0.1:{free_port()}"))
    await server.start()
    raw = RawTxn(port)
    gate, asked = asyncio.Event(), asyncio.Event()
    verify = server.txn.verify_anywhere
    calls: list[list[Any]] = []

    async def slow_for_the_first(tid: str, pid: int, epoch: int, tps: Any) -> Any:
        tps = list(tps)
        calls.append(tps)
        if len(calls) == 1:
            await gate.wait()  # the first produce's verification is slow
        else:
            asked.set()
        return await verify(tid, pid, epoch, tps)

    monkeypatch.setattr(server.txn, "verify_anywhere", slow_for_the_first)
    try:
        topic, tid = unique_topic("order"), "pipelined-produce"

        def begin() -> tuple[int, int]:
            raw.create_topic(topic, 2)
            pid, epoch = raw.init_ok(tid)
            assert raw.add_partitions(tid, pid, epoch, {topic: [0, 1]}) == {(topic, 0): 0, (topic, 1): 0}
            return pid, epoch

        pid, epoch = await asyncio.to_thread(begin)
        first = ProduceRequest(transactional_id=tid, acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
            name=topic, partition_data=[PartitionProduceData(index=0, records=txn_batch(pid, epoch, 0, 3)),
                                        PartitionProduceData(index=1, records=txn_batch(pid, epoch, 0, 3))])])
        second = ProduceRequest(transactional_id=tid, acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
            name=topic, partition_data=[PartitionProduceData(index=1, records=txn_batch(pid, epoch, 3, 2))])])
        raw.send_pipelined([(first, 7), (second, 7)])

        await asyncio.wait_for(asked.wait(), 10)  # the second produce's verification has passed
        for _ in range(5):  # ... and its handler had every chance to append (it needs no I/O to)
            await asyncio.sleep(0)
        gate.set()

        def answers() -> list[Any]:
            return [raw.receive(ProduceRequest, 7)[1] for _ in range(2)]

        got = await asyncio.to_thread(answers)
        codes = [[(p.index, p.error_code) for t in r.responses for p in t.partition_responses] for r in got]
        assert codes == [[(0, 0), (1, 0)], [(1, 0)]], codes
        offsets = [got[0].responses[0].partition_responses[1].base_offset,
                   got[1].responses[0].partition_responses[0].base_offset]
        assert offsets == [0, 3], f"partition 1: the first produce's batch first ({offsets})"
    finally:
        raw.close()
        await server.stop()
