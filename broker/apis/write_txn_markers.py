"""WriteTxnMarkers (27): the partition-leader side of ending a transaction.

Sent by a transaction coordinator's marker sender (never by clients). For each marker and
partition the leader appends a control batch through Partition.append — the one write path — so
producer state ends the open transaction, an abort lands in the `.txnindex`, and the last stable
offset moves. Producer state refuses a marker whose producer epoch is older than the partition
has seen (INVALID_PRODUCER_EPOCH) or whose coordinator epoch is stale
(TRANSACTION_COORDINATOR_FENCED). A marker in `__consumer_offsets`, once replicated, also tells
the group coordinator to publish or drop the transaction's pending offsets.

A marker is answered as written only once the partition's in-sync replicas have it (Kafka appends
markers with acks=-1): the coordinator writes CompleteCommit on that answer and never sends the
marker again, so a marker that only the leader held would be lost with the leader — and with it the
commit of that partition's records (found by the chaos campaign as a committed write missing, its
partition's next marker, an abort of the producer's next epoch, closing the transaction instead).
Not replicated in time: REQUEST_TIMED_OUT (or the ISR's error), and the sender tries again.
"""

from __future__ import annotations

import asyncio

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
from protocol.topic_partition import TopicPartition
from storage.faults import broken, crash_point

from ..context import BrokerContext, ClientInfo
from ..partition import AppendOrigin, Partition

KEY = 27
ORDERED = False
REPLICATION_TIMEOUT_S = 5.0  # the marker sender retries after this
OFFSETS_TOPIC = "__consumer_offsets"
log = structlog.get_logger()


def _write_one(ctx: BrokerContext, topic: str, index: int, producer_id: int, producer_epoch: int,
               commit: bool, coordinator_epoch: int, written: list[tuple[Partition, int]]) -> int:
    part = ctx.topics.partition(topic, index)
    if part is None:
        return ctx.topics.missing(topic, index)
    if topic == OFFSETS_TOPIC and _offsets_partition_loading(ctx, index):
        # The group coordinator is reading this partition back and may already have passed the
        # point where this marker would land: it would miss it, and the offsets would stay pending
        # forever. The marker sender retries once loading is done.
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    if broken("markers") and index == 0 and not topic.startswith("__"):
        return ErrorCode.NONE
    batch = build_control_batch(producer_id, producer_epoch, commit, coordinator_epoch, ctx.clock.now_ms())
    try:
        res = part.append(batch, AppendOrigin.COORDINATOR)
    except KafkaError as e:
        log.info("transaction marker refused", topic=topic, partition=index, producer_id=producer_id,
                 error=e.code.name, reason=e.message)
        return e.code
    ctx.metrics.markers_written["commit" if commit else "abort"] += 1
    written.append((part, res.last_offset + 1))
    return ErrorCode.NONE


def _offsets_partition_loading(ctx: BrokerContext, index: int) -> bool:
    return ctx.groups.is_loading(index)


def _refused(req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    return WriteTxnMarkersResponse(markers=[WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
        WritableTxnMarkerTopicResult(name=t.name, partitions=[
            WritableTxnMarkerPartitionResult(partition_index=i, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            for i in t.partition_indexes]) for t in m.topics]) for m in req.markers])


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    if not client.inter_broker:
        # A client could forge commit or abort markers for someone else's transaction. Until
        # there is authentication, only the inter-broker listener is trusted (Kafka requires
        # CLUSTER_ACTION); every partition gets the error, nothing is written.
        log.warning("WriteTxnMarkers refused: not on the inter-broker listener", peer=client.peer,
                    client_id=client.client_id)
        return _refused(req)
    total = sum(len(t.partition_indexes) for m in req.markers for t in m.topics)
    written = 0
    appended: list[tuple[Partition, int]] = []
    codes: list[list[list[int]]] = []  # per marker, per topic, per partition
    for m in req.markers:
        marker_codes = []
        for t in m.topics:
            topic_codes = []
            for index in t.partition_indexes:
                code = _write_one(ctx, t.name, index, m.producer_id, m.producer_epoch, m.transaction_result,
                                  m.coordinator_epoch, appended)
                if code == ErrorCode.NONE:
                    written += 1
                    if m.transaction_result and total > 1 and written == 1:
                        crash_point("after_some_markers")
                topic_codes.append(code)
            marker_codes.append(topic_codes)
        codes.append(marker_codes)
    # The coordinator writes CompleteX once we answer: the markers must be on disk first, or a
    # power loss could leave a completed transaction whose marker never reached a partition.
    ends: dict[int, tuple[Partition, int]] = {}  # each partition written, with its log end after the markers
    for p, end in appended:
        ends[id(p)] = (p, max(ends.get(id(p), (p, 0))[1], end))
    outcomes = await asyncio.gather(*(p.made_durable() for p, _ in ends.values()), return_exceptions=True)
    failed = [e for e in outcomes if isinstance(e, BaseException)]
    if failed:
        log.error("markers written but not made durable; answered KAFKA_STORAGE_ERROR", exc_info=failed[0])
    waits = await asyncio.gather(*(p.replicated(end, REPLICATION_TIMEOUT_S) for p, end in ends.values()))
    unreplicated = {p.tp: code for (p, _), code in zip(ends.values(), waits, strict=True) if code}
    if not failed:
        # A group's transactional offsets become the committed ones (or are dropped) only now that
        # the marker is on the in-sync replicas, as Kafka's onTransactionCompleted after its acks=-1
        # append: published before, they could be read and then vanish with the leader. Only the
        # groups of each partition written: others complete with their own marker.
        for m, marker_codes in zip(req.markers, codes, strict=True):
            for t, topic_codes in zip(m.topics, marker_codes, strict=True):
                if t.name != OFFSETS_TOPIC:
                    continue
                for index, code in zip(t.partition_indexes, topic_codes, strict=True):
                    if not code and TopicPartition(t.name, index) not in unreplicated:
                        ctx.groups.complete_txn(m.producer_id, m.transaction_result, index)
    return WriteTxnMarkersResponse(markers=[
        WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
            WritableTxnMarkerTopicResult(name=t.name, partitions=[
                WritableTxnMarkerPartitionResult(
                    partition_index=index,
                    error_code=code if code else ErrorCode.KAFKA_STORAGE_ERROR if failed
                    else unreplicated.get(TopicPartition(t.name, index), ErrorCode.NONE))
                for index, code in zip(t.partition_indexes, topic_codes, strict=True)])
            for t, topic_codes in zip(m.topics, marker_codes, strict=True)])
        for m, marker_codes in zip(req.markers, codes, strict=True)])
