"""Fetch (1): whole stored batches from the requested offsets, long-polling for min_bytes.

read_uncommitted reads up to the high watermark; read_committed up to the last stable offset and
lists the aborted transactions that overlap what is returned, so the consumer can drop them
(docs/transactions.md). Fetch sessions (v7+) are declined by answering session id 0: every fetch is a
full fetch, which every client supports.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.fetch import (
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)

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


def _collect(ctx: BrokerContext, req: FetchRequest,
             version: int) -> tuple[FetchResponse, int, list[Partition], bool]:
    """The response as it stands, the bytes in it, the partitions to wait on, and whether reading
    a partition failed (an offset out of range, a fenced epoch): then, like Kafka
    (`errorReadingData`), the fetch is answered at once instead of waiting. Unknown topics and
    partitions do not count: Kafka sets them aside before reading and waits for the rest."""
    isolation = Isolation.READ_COMMITTED if version >= 4 and req.isolation_level == READ_COMMITTED \
        else Isolation.READ_UNCOMMITTED
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
            pd, n = _read(part, fp.fetch_offset, limit, isolation, fp.current_leader_epoch, first)
            failed = failed or pd.error_code != 0
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
    while True:
        resp, total, watched, failed = _collect(ctx, req, version)
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
