"""AddOffsetsToTxn (25): bring a consumer group's offset commit into the transaction.

The coordinator adds the group's `__consumer_offsets` partition to the transaction like any
other partition, so the commit/abort marker reaches the group coordinator and the offsets sent
with TxnOffsetCommit become visible (or are dropped) with the rest of the transaction.
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from protocol.topic_partition import TopicPartition

from ..context import BrokerContext, ClientInfo
from ..group import OFFSETS_TOPIC
from ..txn.wire_errors import for_version

KEY = 25
ORDERED = True  # runs alone on its connection, in request order (broker/connection.py)


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if not req.group_id:
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_GROUP_ID)
    await ctx.groups.ensure_topic()
    tp = TopicPartition(OFFSETS_TOPIC, ctx.groups.partition_for(req.group_id))
    code = await ctx.txn.add_partitions(req.transactional_id, req.producer_id, req.producer_epoch, [tp])
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=for_version(code, KEY, header.api_version))
