"""The client's answer to a busy or moved coordinator, against a scripted peer (helpers/scripted.py).

A real broker answers COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE
or NOT_COORDINATOR only in short windows, so these tests script them: each transactional call of
the producer (and FindCoordinator itself), and each group call of the consumer, first gets the
error and then success. The client must end in the right state having sent exactly one more
request of that API, and for NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE exactly one more
FindCoordinator (it forgets the coordinator and looks it up again); the other codes are retried
on the same coordinator.
"""

from __future__ import annotations

import asyncio

import pytest
from helpers.scripted import ScriptedBroker

from client import Consumer, Producer, ProducerTxnState, TopicPartition
from client.cluster import COORDINATOR_GROUP, COORDINATOR_TRANSACTION
from protocol.errors import ErrorCode as E
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from protocol.messages.end_txn import EndTxnRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.sync_group import SyncGroupRequest
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from protocol.schema import Message

TXN_CODES = [E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_NOT_AVAILABLE,
             E.NOT_COORDINATOR]
GROUP_CODES = [E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR]
MOVED = {E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR}
TOPIC = "t"
GROUP = "g"


def finds(peer: ScriptedBroker, key_type: int) -> int:
    return sum(1 for r in peer.received(FindCoordinatorRequest) if r.key_type == key_type)


TXN_STEPS: dict[str, tuple[type[Message], int]] = {
    "init_transactions": (InitProducerIdRequest, COORDINATOR_TRANSACTION),
    "add_partitions": (AddPartitionsToTxnRequest, COORDINATOR_TRANSACTION),
    "add_offsets": (AddOffsetsToTxnRequest, COORDINATOR_TRANSACTION),
    "txn_offset_commit": (TxnOffsetCommitRequest, COORDINATOR_GROUP),
    "end_txn": (EndTxnRequest, COORDINATOR_TRANSACTION),
}


async def run_transaction(peer: ScriptedBroker, *, commit: bool = True) -> Producer:
    """init, one transaction with a record and group offsets, commit (or abort); returns the producer."""
    async with Producer(peer.bootstrap, transactional_id="tx", retry_backoff_ms=5, max_block_ms=10_000) as p:
        await p.init_transactions()
        await p.begin_transaction()
        fut = await p.send(TOPIC, b"v", partition=0)
        await p.send_offsets_to_transaction({TopicPartition(TOPIC, 0): 7}, GROUP)
        if commit:
            await p.commit_transaction()
            assert (await fut).offset == 0
        else:
            await p.abort_transaction()
        return p


@pytest.mark.parametrize("code", TXN_CODES, ids=lambda c: c.name)
@pytest.mark.parametrize("step", list(TXN_STEPS))
async def test_transactional_call_is_retried(step: str, code: E) -> None:
    request_cls, key_type = TXN_STEPS[step]
    async with ScriptedBroker() as peer:
        peer.add_topic(TOPIC, 1)
        peer.fail(request_cls, code)
        p = await run_transaction(peer)
        assert p.transaction_state is ProducerTxnState.READY
        for cls, _ in TXN_STEPS.values():
            assert peer.count(cls) == (2 if cls is request_cls else 1), cls.__name__
        refound = 1 if code in MOVED else 0
        other = COORDINATOR_GROUP if key_type == COORDINATOR_TRANSACTION else COORDINATOR_TRANSACTION
        assert finds(peer, key_type) == 1 + refound
        assert finds(peer, other) == 1
        assert [b.values for b in peer.written[(TOPIC, 0)]] == [(b"v",)]  # the record went out once
        assert p.txn is not None and p.txn.producer_epoch == 1  # EndTxn v5 bumped the epoch


@pytest.mark.parametrize("code", TXN_CODES, ids=lambda c: c.name)
async def test_end_txn_abort_is_retried(code: E) -> None:
    async with ScriptedBroker() as peer:
        peer.add_topic(TOPIC, 1)
        peer.fail(EndTxnRequest, code)
        p = await run_transaction(peer, commit=False)
        assert p.transaction_state is ProducerTxnState.READY
        ends = peer.received(EndTxnRequest)
        assert len(ends) == 2 and not any(r.committed for r in ends)
        assert finds(peer, COORDINATOR_TRANSACTION) == (2 if code in MOVED else 1)


@pytest.mark.parametrize("code", TXN_CODES, ids=lambda c: c.name)
@pytest.mark.parametrize("key_type", [COORDINATOR_TRANSACTION, COORDINATOR_GROUP], ids=["txn", "group"])
async def test_find_coordinator_is_retried(key_type: int, code: E) -> None:
    async with ScriptedBroker() as peer:
        peer.add_topic(TOPIC, 1)
        if key_type == COORDINATOR_TRANSACTION:
            peer.fail(FindCoordinatorRequest, code, code)
            p = await run_transaction(peer)
            assert p.transaction_state is ProducerTxnState.READY
            assert finds(peer, COORDINATOR_TRANSACTION) == 3
            assert peer.count(InitProducerIdRequest) == 1
        else:
            async with Consumer(peer.bootstrap, group_id=GROUP, retry_backoff_ms=5) as c:
                peer.fail(FindCoordinatorRequest, code, code)
                await c.commit({TopicPartition(TOPIC, 0): 3})
            assert finds(peer, COORDINATOR_GROUP) == 3
            assert peer.count(OffsetCommitRequest) == 1
            assert peer.committed[(TOPIC, 0)] == 3


# ---------------------------------------------------------------------------------------- groups

def group_consumer(peer: ScriptedBroker) -> Consumer:
    return Consumer(peer.bootstrap, group_id=GROUP, enable_auto_commit=False, auto_offset_reset="earliest",
                    heartbeat_interval_ms=20, fetch_max_wait_ms=10, retry_backoff_ms=5, assignors=("range",))


async def join(c: Consumer, partitions: int) -> None:
    c.subscribe([TOPIC])

    async def joined() -> None:
        while len(c.assignment()) < partitions:
            await c.getmany(timeout_ms=50)

    await asyncio.wait_for(joined(), 10)


@pytest.mark.parametrize("code", GROUP_CODES, ids=lambda c: c.name)
async def test_join_group_is_retried(code: E) -> None:
    async with ScriptedBroker() as peer:
        peer.add_topic(TOPIC, 2)
        peer.fail(JoinGroupRequest, code)
        async with group_consumer(peer) as c:
            await join(c, 2)
            assert c.assignment() == {TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)}
        assert peer.count(JoinGroupRequest) == 2
        assert peer.count(SyncGroupRequest) == 1
        assert finds(peer, COORDINATOR_GROUP) == (2 if code in MOVED else 1)


@pytest.mark.parametrize("code", GROUP_CODES, ids=lambda c: c.name)
async def test_sync_group_is_retried_by_rejoining(code: E) -> None:
    async with ScriptedBroker() as peer:
        peer.add_topic(TOPIC, 2)
        peer.fail(SyncGroupRequest, code)
        async with group_consumer(peer) as c:
            await join(c, 2)
            assert c.group_metadata().generation_id == 2
        assert peer.count(SyncGroupRequest) == 2
        assert peer.count(JoinGroupRequest) == 2  # a failed sync means joining again, as Java does
        assert finds(peer, COORDINATOR_GROUP) == (2 if code in MOVED else 1)


@pytest.mark.parametrize("code", GROUP_CODES, ids=lambda c: c.name)
async def test_heartbeat_error_keeps_the_member(code: E) -> None:
    async with ScriptedBroker() as peer:
        peer.add_topic(TOPIC, 2)
        async with group_consumer(peer) as c:
            await join(c, 2)
            before = peer.count(HeartbeatRequest)
            peer.fail(HeartbeatRequest, code)
            await peer.wait_for(HeartbeatRequest, before + 3)
            await c.getmany(timeout_ms=0)  # the poll path would start a rejoin if one were needed
            assert len(c.assignment()) == 2
        assert peer.count(JoinGroupRequest) == 1  # the member was never asked to rejoin
        assert finds(peer, COORDINATOR_GROUP) == (2 if code in MOVED else 1)


@pytest.mark.parametrize("code", GROUP_CODES, ids=lambda c: c.name)
async def test_offset_commit_is_retried(code: E) -> None:
    async with ScriptedBroker() as peer:
        peer.add_topic(TOPIC, 2)
        async with group_consumer(peer) as c:
            await join(c, 2)
            peer.fail(OffsetCommitRequest, code)
            await c.commit({TopicPartition(TOPIC, 1): 42})
            assert peer.committed[(TOPIC, 1)] == 42
            assert peer.count(OffsetCommitRequest) == 2
        assert finds(peer, COORDINATOR_GROUP) == (2 if code in MOVED else 1)


@pytest.mark.parametrize("code", GROUP_CODES, ids=lambda c: c.name)
async def test_offset_fetch_is_retried(code: E) -> None:
    async with ScriptedBroker() as peer:
        peer.add_topic(TOPIC, 2)
        async with group_consumer(peer) as c:
            await join(c, 2)
            await c.commit({TopicPartition(TOPIC, 0): 9})
            for tp in c.assignment():
                await c.position(tp)  # the start position is resolved: no OffsetFetch of its own after this
            before = peer.count(OffsetFetchRequest)
            peer.fail(OffsetFetchRequest, code)
            assert await c.committed(TopicPartition(TOPIC, 0)) == 9
            assert peer.count(OffsetFetchRequest) == before + 2
        assert finds(peer, COORDINATOR_GROUP) == (2 if code in MOVED else 1)
