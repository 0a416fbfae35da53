"""DeleteRecords (21): move partitions' log start offsets forward (kafka-delete-records.sh,
AdminClient.delete_records).

Per partition, in Kafka's order: unknown topic or partition, then internal topic
(INVALID_TOPIC_EXCEPTION: the coordinators own those logs), then the partition's own checks
(broker/partition/: compacted topic, offset out of range). A failed partition answers
low_watermark -1.

The leader moves its own log start at once and answers when the low watermark — the smallest log
start over it and the replicas on live brokers, which learn the new start from their next fetch
and report it in the one after — has reached the requested offset, as Kafka's
DelayedDeleteRecords does: a failover to any of them cannot bring the records back. Past
timeout_ms the partition answers REQUEST_TIMED_OUT with the low watermark as it stands (its own
log start has moved). A sole replica answers at once.
"""

from __future__ import annotations

import asyncio

from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)

from ..context import BrokerContext, ClientInfo

KEY = 21
ORDERED = False
INVALID_LOW_WATERMARK = -1


async def _delete(ctx: BrokerContext, topic: str, index: int, offset: int, timeout_s: float) -> tuple[int, int]:
    """(low watermark, error code) for one partition."""
    part = ctx.topics.partition(topic, index)
    if part is None:
        return INVALID_LOW_WATERMARK, ctx.topics.missing(topic, index)
    t = ctx.topics.get(topic)
    if t is not None and t.is_internal:
        return INVALID_LOW_WATERMARK, ErrorCode.INVALID_TOPIC_EXCEPTION
    try:
        target = part.delete_records(offset)
    except KafkaError as e:
        return INVALID_LOW_WATERMARK, e.code
    return await part.replicas_deleted_before(target, timeout_s)


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    # Kafka keys the request by partition: a partition named twice is deleted to the last offset
    # given and answered once.
    wanted: dict[str, dict[int, int]] = {}
    for t in req.topics:
        for p in t.partitions:
            wanted.setdefault(t.name, {})[p.partition_index] = p.offset
    timeout_s = max(req.timeout_ms, 0) / 1000
    keys = [(name, index) for name, offsets in wanted.items() for index in offsets]
    results = await asyncio.gather(*(_delete(ctx, name, index, wanted[name][index], timeout_s)
                                     for name, index in keys))
    answers = dict(zip(keys, results, strict=True))
    topics = []
    for name, offsets in wanted.items():
        parts = []
        for index in offsets:
            low, code = answers[(name, index)]
            parts.append(DeleteRecordsPartitionResult(partition_index=index, low_watermark=low, error_code=code))
        topics.append(DeleteRecordsTopicResult(name=name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
