"""WriteTxnMarkers (27): the partition-leader side of ending a transaction.

Sent by a transaction coordinator's marker sender (never by clients). For each marker and
partition the leader appends a control batch through Partition.append — the one write path — so
producer state ends the open transaction, an abort lands in the `.txnindex`, and the last stable
offset moves. Producer state refuses a marker whose producer epoch is older than the partition
has seen (INVALID_PRODUCER_EPOCH) or whose coordinator epoch is stale
(TRANSACTION_COORDINATOR_FENCED). A marker in `__consumer_offsets` also tells the group
coordinator to publish or drop the transaction's pending offsets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from protocol.records import build_control_batch

from ..partition import AppendOrigin
from ..txn.faults import crash_point

if TYPE_CHECKING:
    from ..context import BrokerContext, ClientInfo

KEY = 27
OFFSETS_TOPIC = "__consumer_offsets"
log = structlog.get_logger()


def _write_one(ctx: BrokerContext, topic: str, index: int, producer_id: int, producer_epoch: int,
               commit: bool, coordinator_epoch: int) -> int:
    part = ctx.topics.partition(topic, index)
    if part is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if topic == OFFSETS_TOPIC and _offsets_partition_loading(ctx, index):
        # The group coordinator is reading this partition back and may already have passed the
        # point where this marker would land: it would miss it, and the offsets would stay pending
        # forever. The marker sender retries once loading is done.
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    batch = build_control_batch(producer_id, producer_epoch, commit, coordinator_epoch, ctx.clock.now_ms())
    try:
        part.append(batch, AppendOrigin.COORDINATOR)
    except KafkaError as e:
        log.info("transaction marker refused", topic=topic, partition=index, producer_id=producer_id,
                 error=e.code.name, reason=e.message)
        return e.code
    ctx.metrics.markers_written["commit" if commit else "abort"] += 1
    return ErrorCode.NONE


def _offsets_partition_loading(ctx: BrokerContext, index: int) -> bool:
    return ctx.groups.is_loading(index)


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    total = sum(len(t.partition_indexes) for m in req.markers for t in m.topics)
    written = 0
    results = []
    for m in req.markers:
        topics = []
        for t in m.topics:
            parts = []
            for index in t.partition_indexes:
                code = _write_one(ctx, t.name, index, m.producer_id, m.producer_epoch, m.transaction_result,
                                  m.coordinator_epoch)
                if code == ErrorCode.NONE:
                    written += 1
                    if m.transaction_result and total > 1 and written == 1:
                        crash_point("after_some_markers")
                    if t.name == OFFSETS_TOPIC:
                        # only the groups of this partition: others complete with their own marker
                        ctx.groups.complete_txn(m.producer_id, m.transaction_result, index)
                parts.append(WritableTxnMarkerPartitionResult(partition_index=index, error_code=code))
            topics.append(WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
        results.append(WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=results)
