"""What a producer is told when the transaction coordinator's check of its batch says no
(broker/apis/produce.py): Kafka's mapping, TRANSACTION_ABORTABLE kept for the clients that know
it (Produce v11+, KIP-1050), and every other code as it came -- a code the table does not know
must not become a fatal one."""

from __future__ import annotations

import pytest

from broker.apis.produce import verdict_for_producer
from protocol.errors import ErrorCode as E


@pytest.mark.parametrize(("coordinator", "producer"), [
    (E.NONE, E.NONE),
    (E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH),
    (E.INVALID_PRODUCER_EPOCH, E.INVALID_PRODUCER_EPOCH),
    (E.CONCURRENT_TRANSACTIONS, E.NOT_ENOUGH_REPLICAS),
    (E.NOT_COORDINATOR, E.NOT_ENOUGH_REPLICAS),
    (E.COORDINATOR_NOT_AVAILABLE, E.NOT_ENOUGH_REPLICAS),
    (E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_ENOUGH_REPLICAS),
    (E.TRANSACTION_ABORTABLE, E.INVALID_TXN_STATE),  # the partition is not in the ongoing transaction
    (E.INVALID_PRODUCER_ID_MAPPING, E.INVALID_TXN_STATE),  # nor is the producer known
    # a coordinator without metadata yet (simulation seed 3507), a lost answer: retriable, as they came
    (E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_OR_PARTITION),
    (E.REQUEST_TIMED_OUT, E.REQUEST_TIMED_OUT),
])
def test_the_producer_is_told_kafkas_answer(coordinator: E, producer: E) -> None:
    assert verdict_for_producer(coordinator, 10) == producer


@pytest.mark.parametrize(("version", "producer"), [(3, E.INVALID_TXN_STATE), (10, E.INVALID_TXN_STATE),
                                                   (11, E.TRANSACTION_ABORTABLE)])
def test_a_client_that_knows_transaction_abortable_is_told_it(version: int, producer: E) -> None:
    """Java's producer, as ours, treats INVALID_TXN_STATE on a produce as abortable too; on a
    TxnOffsetCommit it is fatal, which is why the code matters (simulation seed 3975)."""
    assert verdict_for_producer(E.TRANSACTION_ABORTABLE, version) == producer
