"""KIP-360 recovery of the producer, against a scripted peer (helpers/scripted.py).

When a broker answers UNKNOWN_PRODUCER_ID (it lost our state) or OUT_OF_ORDER_SEQUENCE_NUMBER that
our own retries did not cause (a batch before this one failed for good), an idempotent producer
gets a new epoch with InitProducerId (carrying its current id and epoch), restarts the affected
partition's sequences at 0 once nothing is in flight, and sends the batches again: every record
is written exactly once, in order. A transactional producer cannot do that inside a transaction:
the error is abortable, and the abort bumps the epoch (by EndTxn v5 itself, or by InitProducerId
after an older EndTxn).

The peer records every batch it accepts with its producer id, epoch and sequence, so the tests
check exactly what the broker would have been asked to write.
"""

from __future__ import annotations

import pytest
from helpers.scripted import ScriptedBroker

from client import KafkaClientError, Producer, ProducerTxnState, TransactionAbortableError
from protocol.errors import ErrorCode as E
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.produce import ProduceRequest
from protocol.supported import SUPPORTED

TOPIC = "t"
LOST = [E.UNKNOWN_PRODUCER_ID, E.OUT_OF_ORDER_SEQUENCE_NUMBER]


def log(peer: ScriptedBroker, partition: int) -> list[tuple[int, int, int, bytes | None]]:
    """(producer id, epoch, sequence, value) of each record the peer wrote to the partition."""
    return [(b.producer_id, b.producer_epoch, b.base_sequence + i, v)
            for b in peer.written[(TOPIC, partition)] for i, v in enumerate(b.values)]


def one_batch_per_record(peer: ScriptedBroker) -> Producer:
    return Producer(peer.bootstrap, linger_ms=0, batch_size=1, retry_backoff_ms=5, max_block_ms=10_000)


@pytest.mark.parametrize("code", LOST, ids=lambda c: c.name)
async def test_idempotent_producer_bumps_the_epoch_and_sends_again(code: E) -> None:
    async with ScriptedBroker() as peer:
        peer.add_topic(TOPIC, 2)
        async with one_batch_per_record(peer) as p:
            await p.send_and_wait(TOPIC, b"a", partition=0)
            await p.send_and_wait(TOPIC, b"x", partition=1)
            await p.send_and_wait(TOPIC, b"b", partition=0)
            peer.fail(ProduceRequest, code)
            meta = await p.send_and_wait(TOPIC, b"c", partition=0)
            await p.send_and_wait(TOPIC, b"d", partition=0)
            await p.send_and_wait(TOPIC, b"y", partition=1)
        assert meta.offset == 2
        inits = peer.received(InitProducerIdRequest)
        assert len(inits) == 2
        old = peer.written[(TOPIC, 0)][0].producer_id
        assert (inits[1].producer_id, inits[1].producer_epoch) == (old, 0)  # v3+: "this is me, bump me"
        new = peer.written[(TOPIC, 0)][-1].producer_id
        assert new != old  # the peer, like Kafka and Ketch, answers an idempotent producer with a fresh id
        assert log(peer, 0) == [(old, 0, 0, b"a"), (old, 0, 1, b"b"), (new, 0, 0, b"c"), (new, 0, 1, b"d")]
        assert log(peer, 1) == [(old, 0, 0, b"x"), (new, 0, 0, b"y")]
        assert peer.count(ProduceRequest) == 7  # c went out twice, everything else once


@pytest.mark.parametrize("code", LOST, ids=lambda c: c.name)
async def test_batches_in_flight_are_resequenced_after_they_drain(code: E) -> None:
    async with ScriptedBroker() as peer:
        peer.add_topic(TOPIC, 1)
        async with one_batch_per_record(peer) as p:
            await p.send_and_wait(TOPIC, b"a", partition=0)
            # three batches in flight at once; the broker has lost our state, so all three fail
            peer.hold(ProduceRequest, 4)
            peer.fail(ProduceRequest, code, code, code)
            futs = []
            for i, v in enumerate((b"b", b"c", b"d")):
                futs.append(await p.send(TOPIC, v, partition=0))
                await peer.wait_for(ProduceRequest, 2 + i)
            offsets = [(await f).offset for f in futs]
        assert offsets == [1, 2, 3]
        assert peer.count(InitProducerIdRequest) == 2  # one bump for the three failures
        old, new = peer.written[(TOPIC, 0)][0].producer_id, peer.written[(TOPIC, 0)][-1].producer_id
        assert log(peer, 0) == [(old, 0, 0, b"a"), (new, 0, 0, b"b"), (new, 0, 1, b"c"), (new, 0, 2, b"d")]


async def test_gap_caused_by_our_own_retry_is_not_a_lost_sequence() -> None:
    async with ScriptedBroker() as peer:
        peer.add_topic(TOPIC, 1)
        async with one_batch_per_record(peer) as p:
            await p.send_and_wait(TOPIC, b"a", partition=0)
            # a is answered NOT_LEADER (retried); b, already in flight behind it, meets the gap a left
            peer.hold(ProduceRequest, 3)
            peer.fail(ProduceRequest, E.NOT_LEADER_OR_FOLLOWER, E.OUT_OF_ORDER_SEQUENCE_NUMBER)
            f1 = await p.send(TOPIC, b"b", partition=0)
            await peer.wait_for(ProduceRequest, 2)
            f2 = await p.send(TOPIC, b"c", partition=0)
            assert [(await f1).offset, (await f2).offset] == [1, 2]
        assert peer.count(InitProducerIdRequest) == 1  # no bump: same producer id, same sequences
        pid = peer.written[(TOPIC, 0)][0].producer_id
        assert log(peer, 0) == [(pid, 0, 0, b"a"), (pid, 0, 1, b"b"), (pid, 0, 2, b"c")]


@pytest.mark.parametrize("code", LOST, ids=lambda c: c.name)
@pytest.mark.parametrize("end_txn_version", [4, 5])
async def test_transactional_producer_aborts_and_the_abort_bumps_the_epoch(code: E, end_txn_version: int) -> None:
    versions = dict(SUPPORTED)
    versions[26] = (0, end_txn_version)  # EndTxn v5 bumps the epoch itself (KIP-890); v4 does not
    async with ScriptedBroker(versions) as peer:
        peer.add_topic(TOPIC, 1)
        async with Producer(peer.bootstrap, transactional_id="tx", linger_ms=0, retry_backoff_ms=5) as p:
            await p.init_transactions()
            await p.begin_transaction()
            await p.send_and_wait(TOPIC, b"a", partition=0)
            peer.fail(ProduceRequest, code)
            fut = await p.send(TOPIC, b"b", partition=0)
            with pytest.raises(TransactionAbortableError):
                await p.commit_transaction()
            with pytest.raises(KafkaClientError) as failed:
                await fut
            assert failed.value.code is code
            assert p.transaction_state is ProducerTxnState.ABORTABLE_ERROR
            await p.abort_transaction()
            assert p.transaction_state is ProducerTxnState.READY
            assert p.txn is not None and p.txn.producer_epoch == 1
            async with p.transaction():
                await p.send(TOPIC, b"c", partition=0)
        inits = peer.received(InitProducerIdRequest)
        pid = peer.written[(TOPIC, 0)][0].producer_id
        if end_txn_version == 4:
            assert len(inits) == 2 and (inits[1].producer_id, inits[1].producer_epoch) == (pid, 0)
        else:
            assert len(inits) == 1
        # the next transaction starts the partition again at sequence 0, under the new epoch
        assert log(peer, 0) == [(pid, 0, 0, b"a"), (pid, 1, 0, b"c")]
        assert peer.count(ProduceRequest) == 3  # b was not retried inside the transaction
