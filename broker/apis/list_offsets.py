"""ListOffsets (2): earliest, latest (the LSO at read_committed), max timestamp, or by timestamp."""

from __future__ import annotations

from protocol.errors import KafkaError
from protocol.headers import RequestHeader
from protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)

from ..context import BrokerContext, ClientInfo
from ..partition import Isolation

KEY = 2
ORDERED = False
READ_COMMITTED = 1


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: ListOffsetsRequest) -> ListOffsetsResponse:
    version = header.api_version
    isolation = Isolation.READ_COMMITTED if version >= 2 and req.isolation_level == READ_COMMITTED \
        else Isolation.READ_UNCOMMITTED
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            part = ctx.topics.partition(t.name, p.partition_index)
            if part is None:
                parts.append(ListOffsetsPartitionResponse(partition_index=p.partition_index,
                                                          error_code=ctx.topics.missing(t.name, p.partition_index)))
                continue
            try:
                offset, ts = part.offset_for(p.timestamp, isolation, p.current_leader_epoch)
            except KafkaError as e:
                parts.append(ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=e.code))
                continue
            if version == 0:
                olds = [offset] if offset >= 0 and p.max_num_offsets > 0 else []
                parts.append(ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=0,
                                                          old_style_offsets=olds))
            else:
                parts.append(ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=0,
                                                          timestamp=ts, offset=offset, leader_epoch=part.leader_epoch))
        topics.append(ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
