"""Metadata (3): brokers, topics and partition leaders; auto-creates topics when allowed.

Everything comes from this broker's metadata image, so every broker answers for the whole
cluster: the live brokers on the listener the request came in on, each partition's leader,
replicas, ISR and the offline replicas: on fenced brokers, or in a log directory their broker
reported failed (KIP-858)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
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

from ..context import BrokerContext, ClientInfo
from .describe_cluster import CLUSTER_OPERATIONS

if TYPE_CHECKING:
    from ..topics import Topic

KEY = 3
ORDERED = False
# Without ACLs every topic operation is allowed, and Kafka then reports all of them: READ, WRITE,
# CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (AclOperation codes).
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def broker_endpoint(ctx: BrokerContext, client: ClientInfo, node: int) -> tuple[str, int] | None:
    """Where a client on this listener reaches broker `node` (None: not a live broker)."""
    if node == ctx.node_id:
        return client.endpoint
    b = ctx.topics.image.broker(node)
    if b is None or b.fenced:
        return None
    return b.address_for(client.listener, client.inter_broker)


def live_brokers(ctx: BrokerContext, client: ClientInfo) -> list[tuple[int, str, int, str | None]]:
    """(id, host, port, rack) of every unfenced broker, and this one whatever the image says."""
    image = ctx.topics.image
    out = {}
    for b in image.brokers:
        ep = broker_endpoint(ctx, client, b.node_id)
        if ep is not None and (not b.fenced or b.node_id == ctx.node_id):
            out[b.node_id] = (b.node_id, ep[0], ep[1], b.rack)
    if ctx.node_id not in out:
        out[ctx.node_id] = (ctx.node_id, client.endpoint[0], client.endpoint[1], ctx.config.rack)
    return [out[k] for k in sorted(out)]


def topic_entry(ctx: BrokerContext, topic: Topic, ops: int = AUTHORIZED_OPERATIONS_OMITTED) -> MetadataResponseTopic:
    image = ctx.topics.image
    offline = {b.node_id for b in image.brokers if b.fenced}
    return MetadataResponseTopic(
        error_code=0, name=topic.name, topic_id=topic.topic_id, is_internal=topic.is_internal,
        topic_authorized_operations=ops,
        partitions=[
            MetadataResponsePartition(
                error_code=ErrorCode.LEADER_NOT_AVAILABLE if p.leader < 0 else 0, partition_index=i,
                leader_id=p.leader, leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr), offline_replicas=[r for r in p.replicas if r in offline or not image.replica_online(p, r)])
            for i, p in enumerate(topic.info.partitions)
        ],
    )


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: MetadataRequest) -> MetadataResponse:
    brokers = live_brokers(ctx, client)
    topics: list[MetadataResponseTopic] = []
    table = ctx.topics
    ops = TOPIC_OPERATIONS if req.include_topic_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
    authz = ctx.authorizer
    if req.topics is None or (header.api_version == 0 and not req.topics):
        # null (v1+) or empty (v0) means every topic: those the requester may not DESCRIBE are left out
        visible = authz.allowed(client, AclOperation.DESCRIBE, ResourceType.TOPIC, table.by_name)
        topics = [topic_entry(ctx, t, ops) for t in table.by_name.values() if t.name in visible]
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
            if not authz.allows(client, AclOperation.DESCRIBE, ResourceType.TOPIC, name or ""):
                # named explicitly: refused, as Kafka answers (whether it exists stays unsaid)
                by_id = rt.name is None  # asked by id: the name is not told either
                topics.append(MetadataResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                    name=None if by_id else name,
                                                    topic_id=rt.topic_id if by_id else ZERO_UUID,
                                                    is_internal=False))
                continue
            t = table.get(name) if name else None
            if t is None:
                auto = ctx.config.auto_create_topics and (header.api_version < 4 or req.allow_auto_topic_creation)
                if auto and not may_create(ctx, client, name or ""):
                    topics.append(MetadataResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name,
                                                        is_internal=False))
                    continue
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if auto:
                    try:
                        t = await table.create(name or "")
                    except KafkaError as e:
                        # Created meanwhile through another broker, and not yet in this one's
                        # image: "being created", retriable, as Kafka answers auto-creation.
                        code = ErrorCode.LEADER_NOT_AVAILABLE if e.code == ErrorCode.TOPIC_ALREADY_EXISTS else e.code
                        t = table.get(name or "")
                if t is None:
                    topics.append(MetadataResponseTopic(error_code=code, name=name, is_internal=False))
                    continue
            topics.append(topic_entry(ctx, t, ops))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponseBroker(node_id=n, host=h, port=p, rack=rack) for n, h, p, rack in brokers],
        cluster_id=ctx.config.cluster_id,
        controller_id=_controller_id(ctx, brokers),
        topics=topics,
        # v8-10 (librdkafka's describe_cluster asks through Metadata v10, not DescribeCluster)
        cluster_authorized_operations=(CLUSTER_OPERATIONS if req.include_cluster_authorized_operations
                                       else AUTHORIZED_OPERATIONS_OMITTED),
    )


def may_create(ctx: BrokerContext, client: ClientInfo, name: str) -> bool:
    """CREATE on the cluster or on the topic (Kafka's check for CreateTopics and auto-creation)."""
    authz = ctx.authorizer
    return authz.allows(client, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME) or \
        authz.allows(client, AclOperation.CREATE, ResourceType.TOPIC, name)


def _controller_id(ctx: BrokerContext, brokers: list[tuple[int, str, int, str | None]]) -> int:
    """The quorum leader when it is a broker clients can reach (combined mode), else this broker:
    clients send nothing to the controller id but take -1 as "no cluster yet"."""
    leader = ctx.quorum.status()[0] if ctx.quorum is not None and ctx.quorum.node is not None else -1
    return leader if any(b[0] == leader for b in brokers) else ctx.node_id
