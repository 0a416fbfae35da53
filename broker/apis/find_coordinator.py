"""FindCoordinator (10): which broker coordinates a group or a transactional id.

The leader of the partition of `__consumer_offsets` or `__transaction_state` that owns the key,
as this broker's metadata image names it — possibly another broker; the topic is created on the
first need. As Kafka does, the leader is named even while its coordinator still loads the
partition: the client goes there and is told COORDINATOR_LOAD_IN_PROGRESS, which it retries. An
error here is worse for a client: librdkafka's coordinator lookup (the one send_offsets_to_transaction
uses) retries COORDINATOR_NOT_AVAILABLE only twice, then waits for some broker connection to
change state, with no deadline. COORDINATOR_NOT_AVAILABLE is for what Kafka answers it: no
leader, or a leader that is not a live broker, or the topic not there yet.
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.find_coordinator import Coordinator, FindCoordinatorRequest, FindCoordinatorResponse

from ..context import BrokerContext, ClientInfo
from ..group.coordinator import OFFSETS_TOPIC
from ..txn.coordinator import TOPIC as TXN_TOPIC
from .metadata import broker_endpoint

KEY = 10
ORDERED = False
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


async def _one(ctx: BrokerContext, client: ClientInfo, key: str, key_type: int) -> Coordinator:
    def refuse(code: ErrorCode, message: str) -> Coordinator:
        return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=message)

    if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
        return refuse(ErrorCode.INVALID_REQUEST, f"unknown key type {key_type}")
    if key_type == KEY_TYPE_GROUP:
        if not ctx.groups.sm.active:
            return refuse(ErrorCode.COORDINATOR_NOT_AVAILABLE, "shutting down")
        await ctx.groups.ensure_topic()
        topic, partition = OFFSETS_TOPIC, ctx.groups.partition_for(key)
    else:
        await ctx.txn.ensure_topic()
        topic, partition = TXN_TOPIC, ctx.txn.partition_for(key)
    info = ctx.topics.image.topics.get(topic)
    leader = info.partitions[partition].leader if info and partition < len(info.partitions) else -1
    endpoint = broker_endpoint(ctx, client, leader) if leader >= 0 else None
    if endpoint is None:
        return refuse(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic}-{partition} has no live leader")
    return Coordinator(key=key, node_id=leader, host=endpoint[0], port=endpoint[1], error_code=0, error_message=None)


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if header.api_version >= 4:
        return FindCoordinatorResponse(coordinators=[await _one(ctx, client, k, req.key_type) for k in req.coordinator_keys])
    c = await _one(ctx, client, req.key, req.key_type)
    return FindCoordinatorResponse(error_code=c.error_code, error_message=c.error_message, node_id=c.node_id,
                                   host=c.host, port=c.port)
