"""Prepared transactions (KIP-939) in the transactional producer's state machine, without a
broker: prepare hands out a token, an instance initialised with KeepPreparedTxn holds the
transaction the broker kept, and either ends it with an ordinary EndTxn."""

from __future__ import annotations

import pytest

from client.errors import IllegalStateError
from client.structs import TopicPartition
from client.transactions import Outcome, PreparedTransaction, ProducerTxnState, TransactionManager

TP0 = TopicPartition("t", 0)


def test_the_token_is_small_and_survives_json() -> None:
    token = PreparedTransaction("tx-7", 1234, 5)
    text = token.to_json()
    assert len(text) < 100
    assert PreparedTransaction.from_json(text) == token
    with pytest.raises(ValueError):
        PreparedTransaction.from_json('{"transactional_id": "tx"}')


def test_init_asks_for_2pc_and_to_keep_the_prepared_transaction() -> None:
    tm = TransactionManager("tx", 10_000, enable_2pc=True)
    req = tm.begin_init(keep_prepared=True)
    assert (req.enable_2pc, req.keep_prepared_txn) == (True, True)
    assert TransactionManager("tx").begin_init() == TransactionManager("tx").init_request()
    assert not TransactionManager("tx").begin_init().enable_2pc


def test_prepare_hands_out_the_transactions_identity_and_then_only_an_end_is_allowed() -> None:
    tm = TransactionManager("tx", 10_000, enable_2pc=True)
    tm.begin_init()
    tm.handle_init(0, 42, 3)
    tm.begin()
    tm.add_partition(TP0)
    tm.take_partitions_to_add()
    tm.handle_add_partitions({TP0: 0})
    token = tm.prepare()
    assert token == PreparedTransaction("tx", 42, 3) and tm.state is ProducerTxnState.PREPARED_TRANSACTION
    assert tm.prepared == token
    with pytest.raises(IllegalStateError):
        tm.add_partition(TopicPartition("t", 1))  # nothing more can join a prepared transaction
    with pytest.raises(IllegalStateError):
        tm.begin()
    assert tm.begin_commit() is True  # an EndTxn is owed
    assert tm.end_txn_request().committed
    assert tm.handle_end_txn(0, 42, 4).outcome is Outcome.DONE
    assert (tm.state, tm.producer_epoch, tm.prepared) == (ProducerTxnState.READY, 4, None)


def test_prepare_needs_2pc() -> None:
    """Without it the coordinator's timeout may abort the transaction: a token would promise
    what the broker does not keep."""
    tm = TransactionManager("tx")
    tm.begin_init()
    tm.handle_init(0, 42, 3)
    tm.begin()
    with pytest.raises(IllegalStateError):
        tm.prepare()
    assert tm.state is ProducerTxnState.IN_TRANSACTION


def test_an_instance_that_kept_a_prepared_transaction_holds_it_and_ends_it_under_its_own_epoch() -> None:
    tm = TransactionManager("tx", 10_000, enable_2pc=True)
    tm.begin_init(keep_prepared=True)
    assert tm.handle_init(0, 42, 4, ongoing_producer_id=42, ongoing_producer_epoch=3).outcome is Outcome.DONE
    assert tm.state is ProducerTxnState.PREPARED_TRANSACTION
    assert tm.prepared == PreparedTransaction("tx", 42, 3)
    assert (tm.producer_id, tm.producer_epoch) == (42, 4)  # the instance's own
    assert tm.begin_abort() is True
    req = tm.end_txn_request()
    assert (req.producer_id, req.producer_epoch, req.committed) == (42, 4, False)
    assert tm.handle_end_txn(0, 42, 5).outcome is Outcome.DONE
    assert (tm.state, tm.prepared) == (ProducerTxnState.READY, None)


def test_keep_prepared_with_nothing_ongoing_is_ready() -> None:
    tm = TransactionManager("tx", 10_000, enable_2pc=True)
    tm.begin_init(keep_prepared=True)
    assert tm.handle_init(0, 42, 4).outcome is Outcome.DONE
    assert (tm.state, tm.prepared) == (ProducerTxnState.READY, None)
