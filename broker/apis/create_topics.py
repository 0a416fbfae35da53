"""CreateTopics (19): validate name, partition count, replication factor and configs, then have the
controller create the topic (here or forwarded) and answer once every live broker's image has it
(broker/propagation.py: a client goes on at once to other brokers)."""

from __future__ import annotations

import uuid

from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages.create_topics import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)

from ..context import BrokerContext, ClientInfo

KEY = 19
ORDERED = False
CONFIG_SOURCE_DEFAULT = 5  # DEFAULT_CONFIG
CONFIG_SOURCE_TOPIC = 1  # DYNAMIC_TOPIC_CONFIG


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: CreateTopicsRequest) -> CreateTopicsResponse:
    results = []
    created: dict[str, int] = {}
    seen: set[str] = set()
    for t in req.topics:
        if t.name in seen:
            results.append(CreatableTopicResult(name=t.name, error_code=ErrorCode.INVALID_REQUEST,
                                                error_message="topic named twice in one request"))
            continue
        seen.add(t.name)
        configs = {c.name: c.value for c in t.configs if c.value is not None}
        assignments = [list(a.broker_ids) for a in sorted(t.assignments, key=lambda a: a.partition_index)]
        try:
            if assignments and (t.num_partitions != -1 or t.replication_factor != -1):
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Both numPartitions or replicationFactor and "
                                 "replicasAssignments were set. Both cannot be used at the same time.")
            if req.validate_only:
                if assignments:
                    n, rf = len(assignments), len(assignments[0])
                else:
                    n, rf = ctx.topics.check_create(t.name, t.num_partitions, t.replication_factor, configs)
                topic_id = uuid.UUID(int=0)
            else:
                topic = await ctx.topics.create(t.name, t.num_partitions, t.replication_factor, configs, assignments)
                n, rf, topic_id = topic.num_partitions, len(topic.info.partitions[0].replicas), topic.topic_id
                created[t.name] = n
        except KafkaError as e:
            results.append(CreatableTopicResult(name=t.name, error_code=e.code, error_message=e.message))
            continue
        effective = ctx.topics.effective_configs(configs)
        results.append(CreatableTopicResult(
            name=t.name, topic_id=topic_id, error_code=0, error_message=None, num_partitions=n,
            replication_factor=rf,
            configs=[CreatableTopicConfigs(name=k, value=v, read_only=False,
                                           config_source=CONFIG_SOURCE_TOPIC if k in configs else CONFIG_SOURCE_DEFAULT,
                                           is_sensitive=False)
                     for k, v in sorted(effective.items())],
        ))
    if created and ctx.propagation is not None and req.timeout_ms > 0:  # 0: the client does not wait
        await ctx.propagation.everywhere(created, req.timeout_ms / 1000)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)
