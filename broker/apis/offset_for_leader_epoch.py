"""OffsetForLeaderEpoch (23): the end offset of a leader epoch, from the partition's epoch history.

The Java consumer and librdkafka send it after a leader change with the epoch of the record at
their position: an end offset below the position means the log was truncated under them. Kafka's
rules: the current epoch ends at the log end; an older one at the start of the next larger known
epoch, reported with the largest known epoch below it; one larger than any is UNDEFINED (-1, -1).
current_leader_epoch (v2+) fences clients with stale metadata; only -1 means "not given".
replica_id (v3+) distinguishes followers, of which a single broker has none.
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopicResult,
)

from ..context import BrokerContext, ClientInfo

KEY = 23
ORDERED = False
NO_EPOCH = -1


def _answer(ctx: BrokerContext, topic: str, p: OffsetForLeaderPartition) -> EpochEndOffset:
    part = ctx.topics.partition(topic, p.partition)
    if part is None:
        return EpochEndOffset(error_code=ctx.topics.missing(topic, p.partition), partition=p.partition)
    current = p.current_leader_epoch
    if current != NO_EPOCH and current != part.leader_epoch:
        code = ErrorCode.FENCED_LEADER_EPOCH if current < part.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH
        return EpochEndOffset(error_code=code, partition=p.partition)
    epoch, end = part.end_offset_for_epoch(p.leader_epoch)
    return EpochEndOffset(error_code=0, partition=p.partition, leader_epoch=epoch, end_offset=end)


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    return OffsetForLeaderEpochResponse(topics=[
        OffsetForLeaderTopicResult(topic=t.topic, partitions=[_answer(ctx, t.topic, p) for p in t.partitions])
        for t in req.topics
    ])
