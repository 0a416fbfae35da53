"""DescribeProducers (61): a partition leader's producer state, including open transactions.

This is what finds hanging transactions (KIP-664): a producer with a `current_txn_start_offset`
holds the partition's last stable offset back, and `ketch txn find-hanging` compares these with
what the coordinators know.
"""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)

from ..context import BrokerContext, ClientInfo

KEY = 61
ORDERED = False


def _partition(ctx: BrokerContext, topic: str, index: int) -> PartitionResponse:
    part = ctx.topics.partition(topic, index)
    if part is None:
        return PartitionResponse(partition_index=index, error_code=ctx.topics.missing(topic, index),
                                 active_producers=[])
    producers = [
        ProducerState(producer_id=e.producer_id, producer_epoch=e.epoch, last_sequence=e.last_seq,
                      last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                      current_txn_start_offset=-1 if e.current_txn_first_offset is None
                      else e.current_txn_first_offset)
        for e in part.active_producers()
    ]
    return PartitionResponse(partition_index=index, error_code=0, active_producers=producers)


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DescribeProducersRequest) -> DescribeProducersResponse:
    return DescribeProducersResponse(throttle_time_ms=0, topics=[
        TopicResponse(name=t.name, partitions=[_partition(ctx, t.name, i) for i in t.partition_indexes])
        for t in req.topics])
