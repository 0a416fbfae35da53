"""FindCoordinator (10): which broker coordinates a group, a transactional id or a share-partition.

The leader of the partition of `__consumer_offsets`, `__transaction_state` or `__share_group_state`
that owns the key (key type 2, v6+: the share coordinator of "group:topicId:partition", which Kafka's
brokers ask for and clients never do; CLUSTER_ACTION, as Kafka authorizes it),
as this broker's metadata image names it — possibly another broker; the topic is created on the
first need. As Kafka does, the leader is named even while its coordinator still loads the
partition: the client goes there and is told COORDINATOR_LOAD_IN_PROGRESS, which it retries. An
error here is worse for a client: librdkafka's coordinator lookup (the one send_offsets_to_transaction
uses) retries COORDINATOR_NOT_AVAILABLE only twice, then waits for some broker connection to
change state, with no deadline. COORDINATOR_NOT_AVAILABLE is for what Kafka answers it: no
leader, or a leader that is not a live broker, or the topic not there yet.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.find_coordinator import Coordinator, FindCoordinatorRequest, FindCoordinatorResponse

from ..context import BrokerContext, ClientInfo
from ..group.coordinator import OFFSETS_TOPIC
from ..share.coordinator import STATE_TOPIC as SHARE_STATE_TOPIC
from ..txn.coordinator import TOPIC as TXN_TOPIC
from .metadata import broker_endpoint

KEY = 10
ORDERED = False
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
KEY_TYPE_SHARE = 2


def share_key(key: str) -> tuple[str, uuid.UUID, int] | None:
    """Kafka's SharePartitionKey "group:topicId:partition" (the group may hold colons), or None."""
    group, _, rest = key.rpartition(":")
    group, _, topic = group.rpartition(":")
    try:
        return (group, uuid.UUID(topic), int(rest)) if group else None
    except ValueError:
        return None


async def _one(ctx: BrokerContext, client: ClientInfo, key: str, key_type: int, version: int) -> Coordinator:
    def refuse(code: ErrorCode, message: str) -> Coordinator:
        return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=message)

    if key_type == KEY_TYPE_SHARE:
        return await _share(ctx, client, key, version, refuse)
    if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
        return refuse(ErrorCode.INVALID_REQUEST, f"unknown key type {key_type}")
    resource, denied = (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED) if key_type == KEY_TYPE_GROUP \
        else (ResourceType.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorizer.allows(client, AclOperation.DESCRIBE, resource, key):
        return refuse(denied, f"{resource.name} authorization failed.")
    if key_type == KEY_TYPE_GROUP:
        if not ctx.groups.sm.active:
            return refuse(ErrorCode.COORDINATOR_NOT_AVAILABLE, "shutting down")
        await ctx.groups.ensure_topic()
        topic, partition = OFFSETS_TOPIC, ctx.groups.partition_for(key)
    else:
        await ctx.txn.ensure_topic()
        topic, partition = TXN_TOPIC, ctx.txn.partition_for(key)
    return _leader_of(ctx, client, key, topic, partition, refuse)


async def _share(ctx: BrokerContext, client: ClientInfo, key: str, version: int,
                 refuse: Callable[[ErrorCode, str], Coordinator]) -> Coordinator:
    if version < 6:
        return refuse(ErrorCode.INVALID_REQUEST, "key type 2 needs FindCoordinator v6")
    if not ctx.authorizer.allows(client, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return refuse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    sk = share_key(key)
    if ctx.share_coordinator is None or sk is None:
        return refuse(ErrorCode.INVALID_REQUEST, f"no share coordinator for key {key!r}")
    await ctx.share_coordinator.ensure_topic()
    return _leader_of(ctx, client, key, SHARE_STATE_TOPIC, ctx.share_coordinator.partition_for(sk), refuse)


def _leader_of(ctx: BrokerContext, client: ClientInfo, key: str, topic: str, partition: int,
               refuse: Callable[[ErrorCode, str], Coordinator]) -> Coordinator:
    info = ctx.topics.image.topics.get(topic)
    leader = info.partitions[partition].leader if info and partition < len(info.partitions) else -1
    endpoint = broker_endpoint(ctx, client, leader) if leader >= 0 else None
    if endpoint is None:
        return refuse(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic}-{partition} has no live leader")
    return Coordinator(key=key, node_id=leader, host=endpoint[0], port=endpoint[1], error_code=0, error_message=None)


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if header.api_version >= 4:
        return FindCoordinatorResponse(coordinators=[await _one(ctx, client, k, req.key_type, header.api_version)
                                                    for k in req.coordinator_keys])
    c = await _one(ctx, client, req.key, req.key_type, header.api_version)
    return FindCoordinatorResponse(error_code=c.error_code, error_message=c.error_message, node_id=c.node_id,
                                   host=c.host, port=c.port)
