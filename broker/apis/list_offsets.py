"""ListOffsets (2): earliest, latest (the LSO at read_committed), max timestamp, or by timestamp."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.batch import HEADER_SIZE
from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from protocol.records import decode_batch

if TYPE_CHECKING:
    from storage.log import PartitionLog

    from ..partition import Partition
    from ..server import BrokerServer, ClientInfo

KEY = 2
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
READ_COMMITTED = 1


def lookup(part: Partition, timestamp: int, committed: bool) -> tuple[int, int]:
    """(offset, timestamp) for one ListOffsets query; (-1, -1) when no record qualifies."""
    plog = part.log
    if timestamp == LATEST:
        return (plog.last_stable_offset if committed else plog.high_watermark), -1
    if timestamp == EARLIEST:
        return plog.log_start_offset, -1
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp_offset() if hasattr(plog, "max_timestamp_offset") else None
        return (found[0], found[1]) if found else (-1, -1)
    if timestamp < 0:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown special timestamp {timestamp}")
    found = plog.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1
    offset, ts = _exact(plog, found[0], timestamp) or found
    upper = plog.last_stable_offset if committed else plog.high_watermark
    if offset >= upper:
        return -1, -1
    return offset, ts


def _exact(plog: PartitionLog, batch_offset: int, timestamp: int) -> tuple[int, int] | None:
    """The index finds the batch; Kafka answers with the record, so decode that one batch."""
    data = plog.read(batch_offset, 1).data
    if len(data) < HEADER_SIZE:
        return None
    for r in decode_batch(data)[1]:
        if r.timestamp >= timestamp and r.offset >= batch_offset:
            return r.offset, r.timestamp
    return None


async def handle(server: BrokerServer, client: ClientInfo, header: RequestHeader,
                 req: ListOffsetsRequest) -> ListOffsetsResponse:
    version = header.api_version
    committed = version >= 2 and req.isolation_level == READ_COMMITTED
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            part = server.topics.partition(t.name, p.partition_index)
            if part is None:
                parts.append(ListOffsetsPartitionResponse(partition_index=p.partition_index,
                                                          error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if p.current_leader_epoch >= 0 and p.current_leader_epoch != part.leader_epoch:
                code = (ErrorCode.FENCED_LEADER_EPOCH if p.current_leader_epoch < part.leader_epoch
                        else ErrorCode.UNKNOWN_LEADER_EPOCH)
                parts.append(ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code))
                continue
            try:
                offset, ts = lookup(part, p.timestamp, committed)
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
