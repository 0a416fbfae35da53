"""Metadata (3): brokers, topics and partition leaders; auto-creates topics when allowed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages.describe_cluster import AUTHORIZED_OPERATIONS_OMITTED
from protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from protocol.primitives import ZERO_UUID

from .describe_cluster import CLUSTER_OPERATIONS

if TYPE_CHECKING:
    from ..context import BrokerContext, ClientInfo
    from ..topics import Topic

KEY = 3
# Without ACLs every topic operation is allowed, and Kafka then reports all of them: READ, WRITE,
# CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (AclOperation codes).
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def topic_entry(ctx: BrokerContext, topic: Topic, ops: int = AUTHORIZED_OPERATIONS_OMITTED) -> MetadataResponseTopic:
    node = ctx.node_id
    return MetadataResponseTopic(
        error_code=0, name=topic.name, topic_id=topic.topic_id, is_internal=topic.is_internal,
        topic_authorized_operations=ops,
        partitions=[
            MetadataResponsePartition(error_code=0, partition_index=p.index, leader_id=node,
                                      leader_epoch=p.leader_epoch, replica_nodes=[node], isr_nodes=[node],
                                      offline_replicas=[])
            for p in topic.partitions
        ],
    )


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: MetadataRequest) -> MetadataResponse:
    host, port = client.endpoint  # the listener this request came in on
    topics: list[MetadataResponseTopic] = []
    table = ctx.topics
    ops = TOPIC_OPERATIONS if req.include_topic_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
    if req.topics is None or (header.api_version == 0 and not req.topics):
        # null (v1+) or empty (v0) means every topic
        topics = [topic_entry(ctx, t, ops) for t in table.by_name.values()]
    else:
        for rt in req.topics:
            name = rt.name
            if name is None and rt.topic_id != ZERO_UUID:
                found = table.by_id.get(rt.topic_id)
                if found is None:
                    topics.append(MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                                                        topic_id=rt.topic_id))
                    continue
                name = found.name
            t = table.get(name) if name else None
            if t is None:
                auto = ctx.config.auto_create_topics and (header.api_version < 4 or req.allow_auto_topic_creation)
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if auto:
                    try:
                        t = table.create(name or "")
                    except KafkaError as e:
                        code = e.code
                if t is None:
                    topics.append(MetadataResponseTopic(error_code=code, name=name, is_internal=False))
                    continue
            topics.append(topic_entry(ctx, t, ops))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponseBroker(node_id=ctx.node_id, host=host, port=port, rack=ctx.config.rack)],
        cluster_id=ctx.config.cluster_id,
        controller_id=ctx.node_id,
        topics=topics,
        # v8-10 (librdkafka's describe_cluster asks through Metadata v10, not DescribeCluster)
        cluster_authorized_operations=(CLUSTER_OPERATIONS if req.include_cluster_authorized_operations
                                       else AUTHORIZED_OPERATIONS_OMITTED),
    )
