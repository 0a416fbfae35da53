"""The partition leader's zombie check for transactional produce (KIP-890 part 1).

Kafka's defence against a transactional write that belongs to no open transaction — a produce
delayed in the network until after its transaction ended, or a producer that skipped
AddPartitionsToTxn — is at the partition leader: the first transactional batch of a producer in
a partition (when the leader's producer state shows no transaction open for it) is held until the
transaction coordinator confirms the partition is part of the producer's ongoing transaction. On
a cluster that question is an AddPartitionsToTxn v4 request with verify_only=true to the
coordinator (TransactionCoordinator.verify_anywhere): asked directly when the coordinator is this
broker, over the inter-broker listener otherwise, with the same answers. Batches after the first of a transaction need no check: producer state already ties
them to the open transaction.

What the producer is told (Kafka's mapping for clients that predate TRANSACTION_ABORTABLE):
    PRODUCER_FENCED                               -> INVALID_PRODUCER_EPOCH
    CONCURRENT_TRANSACTIONS, coordinator moving   -> NOT_ENOUGH_REPLICAS (retriable)
    not in the transaction, unknown producer id   -> INVALID_TXN_STATE
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from protocol.batch import BatchHeader
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from storage.faults import broken

if TYPE_CHECKING:
    from ..partition import Partition
    from .coordinator import TransactionCoordinator

_FOR_PRODUCER = {
    ErrorCode.NONE: ErrorCode.NONE,
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.INVALID_PRODUCER_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
}


def needs_verification(part: Partition, h: BatchHeader) -> bool:
    """True for a transactional batch that would open a transaction in this partition."""
    if not h.is_transactional or h.producer_id < 0:
        return False
    entry = part.producer(h.producer_id)
    return entry is None or entry.current_txn_first_offset is None or entry.epoch != h.producer_epoch


async def verify(coordinator: TransactionCoordinator, transactional_id: str, producer_id: int, producer_epoch: int,
                 partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    """Per partition, the error the producer gets (NONE: go ahead and append)."""
    out: dict[TopicPartition, ErrorCode] = {}
    for tp in partitions:
        code = await coordinator.verify_anywhere(transactional_id, producer_id, producer_epoch, [tp])
        out[tp] = _FOR_PRODUCER.get(code, ErrorCode.INVALID_TXN_STATE)
        out[tp] = ErrorCode.NONE if out[tp] == ErrorCode.INVALID_PRODUCER_EPOCH and broken("fence") else out[tp]
    return out
