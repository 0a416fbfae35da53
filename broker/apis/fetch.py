"""Fetch (1): whole stored batches from the requested offsets, long-polling for min_bytes.

read_uncommitted reads up to the high watermark; read_committed up to the last stable offset and
lists the aborted transactions that overlap what is returned, so the consumer can drop them
(design.md §5). Fetch sessions (v7+) are declined by answering session id 0: every fetch is a
full fetch, which every client supports.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages.fetch import (
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)

if TYPE_CHECKING:
    from ..partition import Partition
    from ..server import BrokerServer, ClientInfo

KEY = 1
READ_COMMITTED = 1


def _error(index: int, code: ErrorCode) -> PartitionData:
    return PartitionData(partition_index=index, error_code=code, high_watermark=-1, last_stable_offset=-1,
                         log_start_offset=-1, records=b"")


def _read(part: Partition, offset: int, max_bytes: int, committed: bool, first: bool) -> tuple[PartitionData, int]:
    plog = part.log
    hw = plog.high_watermark
    lso = plog.last_stable_offset
    upper = lso if committed else hw
    try:
        if upper <= offset <= plog.log_end_offset:
            data: bytes | memoryview = b""
        else:
            data = plog.read(offset, max_bytes, upper_bound=upper).data
    except KafkaError as e:
        return PartitionData(partition_index=part.index, error_code=e.code, high_watermark=hw,
                             last_stable_offset=lso, log_start_offset=plog.log_start_offset, records=b""), 0
    if not first and len(data) > max_bytes:
        data = b""  # only the first partition may exceed the budget (Kafka's min-one-message rule)
    aborted = None
    if committed:
        aborted = []
        if data:
            aborted = plog.aborted_transactions(offset, upper)
    return PartitionData(partition_index=part.index, error_code=0, high_watermark=hw, last_stable_offset=lso,
                         log_start_offset=plog.log_start_offset, aborted_transactions=aborted,
                         preferred_read_replica=-1, records=data), len(data)


def _collect(server: BrokerServer, req: FetchRequest,
             version: int) -> tuple[FetchResponse, int, list[Partition], bool]:
    """The response as it stands, the bytes in it, the partitions to wait on, and whether reading
    a partition failed (an offset out of range, a fenced epoch): then, like Kafka
    (`errorReadingData`), the fetch is answered at once instead of waiting. Unknown topics and
    partitions do not count: Kafka sets them aside before reading and waits for the rest."""
    committed = version >= 4 and req.isolation_level == READ_COMMITTED
    budget = req.max_bytes if version >= 3 else 0x7FFFFFFF
    total = 0
    first = True
    failed = False
    watched: list[Partition] = []
    topics: list[FetchableTopicResponse] = []
    for ft in req.topics:
        name = ft.topic
        if version >= 13:
            t = server.topics.by_id.get(ft.topic_id)
            if t is None:
                topics.append(FetchableTopicResponse(topic=name, topic_id=ft.topic_id, partitions=[
                    _error(fp.partition, ErrorCode.UNKNOWN_TOPIC_ID) for fp in ft.partitions]))
                continue
            name = t.name
        out = []
        for fp in ft.partitions:
            part = server.topics.partition(name, fp.partition)
            if part is None:
                out.append(_error(fp.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            watched.append(part)
            if fp.current_leader_epoch >= 0 and fp.current_leader_epoch > part.leader_epoch:
                out.append(_error(fp.partition, ErrorCode.UNKNOWN_LEADER_EPOCH))
                failed = True
                continue
            if 0 <= fp.current_leader_epoch < part.leader_epoch:
                out.append(_error(fp.partition, ErrorCode.FENCED_LEADER_EPOCH))
                failed = True
                continue
            limit = min(fp.partition_max_bytes, max(budget - total, 0))
            pd, n = _read(part, fp.fetch_offset, limit, committed, first)
            failed = failed or pd.error_code != 0
            if n:
                first = False
            total += n
            out.append(pd)
        topics.append(FetchableTopicResponse(topic=name, topic_id=ft.topic_id, partitions=out))
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics), total, watched, failed


async def handle(server: BrokerServer, client: ClientInfo, header: RequestHeader, req: FetchRequest) -> FetchResponse:
    version = header.api_version
    deadline = time.monotonic() + max(req.max_wait_ms, 0) / 1000
    loop = asyncio.get_running_loop()
    while True:
        resp, total, watched, failed = _collect(server, req, version)
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
