"""CreatePartitions (37): raise topics' partition counts (kafka-topics --alter --partitions), answered
once every live broker's image has the new partitions (broker/propagation.py)."""

from __future__ import annotations

from collections import Counter

from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)

from ..context import BrokerContext, ClientInfo

KEY = 37
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    named = Counter(t.name for t in req.topics)
    # As Kafka: a name given twice is answered once, with an error, and grows by neither entry.
    results = [CreatePartitionsTopicResult(name=n, error_code=ErrorCode.INVALID_REQUEST,
                                           error_message="Duplicate topic name.")
               for n, times in named.items() if times > 1]
    grown: dict[str, int] = {}
    for t in req.topics:
        if named[t.name] > 1:
            continue
        assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
        try:
            if req.validate_only:
                ctx.topics.check_add_partitions(t.name, t.count, assignments)
            else:
                await ctx.topics.add_partitions(t.name, t.count, assignments)
                grown[t.name] = t.count
        except KafkaError as e:
            results.append(CreatePartitionsTopicResult(name=t.name, error_code=e.code, error_message=e.message))
        else:
            results.append(CreatePartitionsTopicResult(name=t.name, error_code=0, error_message=None))
    if grown and ctx.propagation is not None and req.timeout_ms > 0:  # 0: the client does not wait
        await ctx.propagation.everywhere(grown, req.timeout_ms / 1000)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
