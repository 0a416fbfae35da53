"""Error codes as each request version's clients understand them.

PRODUCER_FENCED (90) arrived with KIP-588 together with a version bump of every transactional
API; a client speaking an older version does not know the code and must get
INVALID_PRODUCER_EPOCH instead, which it treats the same way (fatal, fenced). Kafka does this
mapping in its request handlers; so do we.

TRANSACTION_ABORTABLE (120, KIP-1050) is what the coordinator's check answers when a write is not
part of the producer's ongoing transaction: the transaction must abort, the producer lives on.
Clients from Produce v11 and TxnOffsetCommit v4 know it; older ones are told INVALID_TXN_STATE,
as Kafka's partition leaders tell them -- which a TxnOffsetCommit client (Java's, ours) takes
for fatal, so a stale coordinator's refusal killed the application (simulation seed 3975).
"""

from __future__ import annotations

from protocol.errors import ErrorCode

# First version of each API (by key) whose clients understand PRODUCER_FENCED.
FENCED_FROM = {
    22: 4,  # InitProducerId
    24: 2,  # AddPartitionsToTxn
    25: 2,  # AddOffsetsToTxn
    26: 2,  # EndTxn
    28: 3,  # TxnOffsetCommit
}


# First version of each API (by key) whose clients understand TRANSACTION_ABORTABLE.
ABORTABLE_FROM = {
    0: 11,  # Produce
    28: 4,  # TxnOffsetCommit
}


def for_version(code: int, api_key: int, version: int) -> int:
    if code == ErrorCode.PRODUCER_FENCED and version < FENCED_FROM.get(api_key, 0):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code == ErrorCode.TRANSACTION_ABORTABLE and version < ABORTABLE_FROM.get(api_key, 0):
        return ErrorCode.INVALID_TXN_STATE
    return code
