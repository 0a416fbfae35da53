"""DeleteRecords (21): move partitions' log start offsets forward (kafka-delete-records.sh,
AdminClient.delete_records).

Per partition, in Kafka's order: unknown topic or partition, then internal topic
(INVALID_TOPIC_EXCEPTION: the coordinators own those logs), then the partition's own checks
(broker/partition.py: compacted topic, offset out of range). A failed partition answers
low_watermark -1. On one broker the new start is final at once, so timeout_ms is never waited on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)

if TYPE_CHECKING:
    from ..context import BrokerContext, ClientInfo

KEY = 21
INVALID_LOW_WATERMARK = -1


def _delete(ctx: BrokerContext, topic: str, index: int, offset: int) -> tuple[int, int]:
    """(low watermark, error code) for one partition."""
    part = ctx.topics.partition(topic, index)
    if part is None:
        return INVALID_LOW_WATERMARK, ctx.topics.missing(topic, index)
    t = ctx.topics.get(topic)
    if t is not None and t.is_internal:
        return INVALID_LOW_WATERMARK, ErrorCode.INVALID_TOPIC_EXCEPTION
    try:
        return part.delete_records(offset), 0
    except KafkaError as e:
        return INVALID_LOW_WATERMARK, e.code


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    # Kafka keys the request by partition: a partition named twice is deleted to the last offset
    # given and answered once.
    wanted: dict[str, dict[int, int]] = {}
    for t in req.topics:
        for p in t.partitions:
            wanted.setdefault(t.name, {})[p.partition_index] = p.offset
    topics = []
    for name, offsets in wanted.items():
        parts = []
        for index, offset in offsets.items():
            low, code = _delete(ctx, name, index, offset)
            parts.append(DeleteRecordsPartitionResult(partition_index=index, low_watermark=low, error_code=code))
        topics.append(DeleteRecordsTopicResult(name=name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
