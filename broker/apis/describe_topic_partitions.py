"""DescribeTopicPartitions (75, KIP-966): what Metadata says about topics, paged by a cursor.

Topics are answered in name order; the partitions of all of them together are cut at
`response_partition_limit` (and at most MAX_PARTITIONS_PER_RESPONSE, Kafka's
max.request.partition.size.limit), and `next_cursor` names the first partition left out. An
empty topic list means every topic. As in Kafka, a cursor naming a topic that was not asked for
answers INVALID_REQUEST for every topic.
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.describe_topic_partitions import (
    Cursor,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)

from ..context import BrokerContext, ClientInfo
from .metadata import TOPIC_OPERATIONS

KEY = 75
ORDERED = False
MAX_PARTITIONS_PER_RESPONSE = 2000


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    table = ctx.topics
    names = sorted({t.name for t in req.topics}) if req.topics else sorted(table.by_name)
    start_topic, start_index = (req.cursor.topic_name, req.cursor.partition_index) if req.cursor else ("", 0)
    if req.cursor is not None and (start_topic not in names or start_index < 0):
        # Kafka's error response: every requested topic carries the error
        return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[
            DescribeTopicPartitionsResponseTopic(error_code=ErrorCode.INVALID_REQUEST, name=n) for n in names])
    budget = max(0, min(req.response_partition_limit, MAX_PARTITIONS_PER_RESPONSE))
    topics: list[DescribeTopicPartitionsResponseTopic] = []
    next_cursor: Cursor | None = None
    for name in names:
        if name < start_topic:
            continue
        topic = table.get(name)
        if topic is None:
            topics.append(DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, is_internal=False))
            continue
        first = start_index if name == start_topic else 0
        if budget == 0:
            next_cursor = Cursor(topic_name=name, partition_index=first)
            break
        chosen = list(enumerate(topic.info.partitions))[first:first + budget]
        budget -= len(chosen)
        image = table.image
        offline = {b.node_id for b in image.brokers if b.fenced}
        topics.append(DescribeTopicPartitionsResponseTopic(
            error_code=0, name=name, topic_id=topic.topic_id, is_internal=topic.is_internal,
            topic_authorized_operations=TOPIC_OPERATIONS,
            partitions=[DescribeTopicPartitionsResponsePartition(
                error_code=ErrorCode.LEADER_NOT_AVAILABLE if p.leader < 0 else 0, partition_index=i,
                leader_id=p.leader, leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr), offline_replicas=[r for r in p.replicas if r in offline or not image.replica_online(p, r)],
                eligible_leader_replicas=list(p.elr), last_known_elr=list(p.last_known_elr))
                for i, p in chosen]))
        if first + len(chosen) < topic.num_partitions:
            next_cursor = Cursor(topic_name=name, partition_index=first + len(chosen))
            break
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)
