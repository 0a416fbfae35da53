"""DeleteTopics (20): by name (v0-5) or by name or topic id (v6+); answered once no live broker
lists a deleted topic any more (broker/propagation.py)."""

from __future__ import annotations

import uuid

from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages.delete_topics import DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse
from protocol.primitives import ZERO_UUID

from ..context import BrokerContext, ClientInfo

KEY = 20
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    wanted: list[tuple[str | None, uuid.UUID | None]] = []
    if header.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(n, None) for n in req.topic_names]
    results = []
    deleted: dict[str, int] = {}
    for name, topic_id in wanted:
        if name is None and topic_id not in (None, ZERO_UUID):
            t = ctx.topics.by_id.get(topic_id)
            if t is None:
                results.append(DeletableTopicResult(name=None, topic_id=topic_id,
                                                    error_code=ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            name = t.name
        try:
            found = ctx.topics.get(name or "")
            if found is not None and found.is_internal:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "internal topics cannot be deleted")
            topic = await ctx.topics.delete(name or "")
            results.append(DeletableTopicResult(name=name, topic_id=topic.topic_id, error_code=0))
            deleted[topic.name] = 0
        except KafkaError as e:
            results.append(DeletableTopicResult(name=name, topic_id=topic_id or ZERO_UUID, error_code=e.code,
                                                error_message=e.message))
    if deleted and ctx.propagation is not None and req.timeout_ms > 0:  # 0: the client does not wait
        await ctx.propagation.everywhere(deleted, req.timeout_ms / 1000)
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
