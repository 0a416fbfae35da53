"""Fetch (1): whole stored batches from the requested offsets, long-polling for min_bytes.

read_uncommitted reads up to the high watermark; read_committed up to the last stable offset and
lists the aborted transactions that overlap what is returned, so the consumer can drop them
(docs/transactions.md). Fetch sessions (v7+) are declined by answering session id 0: every fetch is a
full fetch, which every client supports.

A fetch with a replica id (v0-14 `replica_id`, v15+ `replica_state`) on the inter-broker listener is a
follower copying its leader: it reads up to the log end, is answered with the divergence point instead
of records when its last fetched epoch parts from ours (Fetch v12+, KIP-320), and tells the leader how
far the follower has got — the high watermark moves, the follower may rejoin the ISR.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.fetch import (
    EpochEndOffset,
    FetchableTopicResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    PartitionData,
)

from ..broken import broken
from ..partition import Isolation

if TYPE_CHECKING:
    from ..context import BrokerContext, ClientInfo
    from ..partition import Partition

KEY = 1
READ_COMMITTED = 1


def _error(index: int, code: ErrorCode) -> PartitionData:
    return PartitionData(partition_index=index, error_code=code, high_watermark=-1, last_stable_offset=-1,
                         log_start_offset=-1, records=b"")


def _read(part: Partition, offset: int, max_bytes: int, isolation: Isolation, current_leader_epoch: int,
          first: bool) -> tuple[PartitionData, int]:
    r = part.read(offset, max_bytes, isolation, current_leader_epoch)
    data = r.records
    if not first and len(data) > max_bytes:
        data = b""  # only the first partition may exceed the budget (Kafka's min-one-message rule)
    if r.error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH):
        return _error(part.index, r.error), 0
    return PartitionData(partition_index=part.index, error_code=r.error, high_watermark=r.high_watermark,
                         last_stable_offset=r.last_stable_offset, log_start_offset=r.log_start_offset,
                         aborted_transactions=r.aborted if data or r.aborted is None else [],
                         preferred_read_replica=-1, records=data), len(data)


def replica_of(req: FetchRequest, version: int, client: ClientInfo) -> int:
    """The follower's broker id for a replica fetch, -1 for a consumer (and on client listeners:
    only brokers replicate)."""
    replica = req.replica_state.replica_id if version >= 15 else req.replica_id
    return replica if replica >= 0 and client.inter_broker else -1


def _follower_fetched(ctx: BrokerContext, req: FetchRequest, version: int, replica: int) -> None:
    """Record the follower's position in every partition it asked for (once per request)."""
    for ft in req.topics:
        t = ctx.topics.by_id.get(ft.topic_id) if version >= 13 else ctx.topics.get(ft.topic)
        if t is None:
            continue
        for fp in ft.partitions:
            part = t.local.get(fp.partition)
            if part is None or not part.is_leader or part.check_epoch(fp.current_leader_epoch):
                continue
            if part.diverging(fp.fetch_offset, fp.last_fetched_epoch) is not None:
                continue
            change = part.on_follower_fetch(replica, fp.fetch_offset, fp.log_start_offset)
            if change is not None and ctx.replication is not None:
                ctx.replication.request_isr_change(part, change)


def _replica_read(part: Partition, fp: FetchPartition, limit: int, first: bool) -> tuple[PartitionData, int]:
    code = ErrorCode.NONE if part.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER
    code = code or part.check_epoch(fp.current_leader_epoch)
    if code:
        return _error(part.index, code), 0
    div = part.diverging(fp.fetch_offset, fp.last_fetched_epoch)
    if div is not None:
        return PartitionData(partition_index=part.index, error_code=0, high_watermark=part.high_watermark,
                             last_stable_offset=part.last_stable_offset, log_start_offset=part.log_start_offset,
                             diverging_epoch=EpochEndOffset(epoch=div[0], end_offset=div[1]), records=b""), 0
    return _read(part, fp.fetch_offset, limit, Isolation.LOG_END, fp.current_leader_epoch, first)


def _collect(ctx: BrokerContext, req: FetchRequest, version: int,
             replica: int = -1) -> tuple[FetchResponse, int, list[Partition], bool]:
    """The response as it stands, the bytes in it, the partitions to wait on, and whether reading
    a partition failed (an offset out of range, a fenced epoch): then, like Kafka
    (`errorReadingData`), the fetch is answered at once instead of waiting. Unknown topics and
    partitions do not count: Kafka sets them aside before reading and waits for the rest."""
    isolation = Isolation.READ_COMMITTED if version >= 4 and req.isolation_level == READ_COMMITTED \
        and not broken("lso") else Isolation.READ_UNCOMMITTED
    budget = req.max_bytes if version >= 3 else 0x7FFFFFFF
    total = 0
    first = True
    failed = False
    watched: list[Partition] = []
    topics: list[FetchableTopicResponse] = []
    for ft in req.topics:
        name = ft.topic
        if version >= 13:
            t = ctx.topics.by_id.get(ft.topic_id)
            if t is None:
                topics.append(FetchableTopicResponse(topic=name, topic_id=ft.topic_id, partitions=[
                    _error(fp.partition, ErrorCode.UNKNOWN_TOPIC_ID) for fp in ft.partitions]))
                continue
            name = t.name
        out = []
        for fp in ft.partitions:
            part = ctx.topics.partition(name, fp.partition)
            if part is None:
                out.append(_error(fp.partition, ctx.topics.missing(name, fp.partition)))
                continue
            watched.append(part)
            limit = min(fp.partition_max_bytes, max(budget - total, 0))
            if replica >= 0:
                pd, n = _replica_read(part, fp, limit, first)
            else:
                pd, n = _read(part, fp.fetch_offset, limit, isolation, fp.current_leader_epoch, first)
            failed = failed or pd.error_code != 0 or pd.diverging_epoch.epoch >= 0  # answer at once
            if n:
                first = False
            total += n
            out.append(pd)
        topics.append(FetchableTopicResponse(topic=name, topic_id=ft.topic_id, partitions=out))
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics), total, watched, failed


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader, req: FetchRequest) -> FetchResponse:
    version = header.api_version
    deadline = time.monotonic() + max(req.max_wait_ms, 0) / 1000
    loop = asyncio.get_running_loop()
    replica = replica_of(req, version, client)
    if replica >= 0:
        _follower_fetched(ctx, req, version, replica)
    while True:
        resp, total, watched, failed = _collect(ctx, req, version, replica)
        remaining = deadline - time.monotonic()
        if total >= max(req.min_bytes, 1) or remaining <= 0 or not watched or failed:
            return resp
        fut: asyncio.Future[None] = loop.create_future()
        for p in watched:
            p.add_waiter(fut)
        try:
            await asyncio.wait_for(fut, remaining)
        except TimeoutError:
            pass
        finally:
            for p in watched:
                p.discard_waiter(fut)
