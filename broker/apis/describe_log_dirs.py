"""DescribeLogDirs (35): every log directory, its partitions' sizes and the volume's space
(kafka-log-dirs.sh, KafkaAdminClient.describe_log_dirs).

One result per log directory in configured order, its absolute path as Kafka answers; one that is
offline (failed, or unusable at start) is KAFKA_STORAGE_ERROR with no partitions. topics null
means every partition, internal topics included; otherwise only the named partitions that exist
here, and a topic with none of them is left out, as in Kafka. Sizes are the segments' .log bytes
(indexes and checkpoints are not counted, like Kafka's log.size); the offset lag is the high
watermark minus the log end, 0 on a leader; a future replica's is how far it is behind the
current one.
"""

from __future__ import annotations

import os
from pathlib import Path

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)

from ..context import BrokerContext, ClientInfo

KEY = 35
ORDERED = False


def _space(path: str) -> tuple[int, int]:
    """(total, usable) bytes of the volume: Java's FileStore getTotalSpace / getUsableSpace."""
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    wanted: dict[str, set[int]] | None = None
    if req.topics is not None:
        wanted = {}
        for t in req.topics:
            wanted.setdefault(t.topic, set()).update(t.partitions)
    # log directory -> topic -> partitions: each replica where its log is, a future one (a move
    # under way, broker/partition/move.py) in its destination, with the lag Kafka reports for it
    # (the current log's end minus the future's)
    held: dict[Path, dict[str, list[DescribeLogDirsPartition]]] = {}
    for name, topic in ctx.topics.by_name.items():
        if wanted is not None and name not in wanted:
            continue
        for p in topic.partitions:
            if wanted is not None and p.index not in wanted[name]:
                continue
            held.setdefault(p.directory.parent, {}).setdefault(name, []).append(DescribeLogDirsPartition(
                partition_index=p.index, partition_size=p.size_in_bytes,
                offset_lag=max(p.high_watermark - p.log_end_offset, 0), is_future_key=False))
            move = ctx.topics.moves.get((name, p.index))
            future = None if move is None else move.future
            if future is not None:
                held.setdefault(future.directory.parent, {}).setdefault(name, []).append(DescribeLogDirsPartition(
                    partition_index=p.index, partition_size=future.size_in_bytes,
                    offset_lag=max(p.log_end_offset - future.log_end_offset, 0), is_future_key=True))
    results = []
    for d in ctx.topics.log_dirs.dirs:
        topics = [DescribeLogDirsTopic(name=n, partitions=ps) for n, ps in held.get(d.path, {}).items()]
        try:
            if not d.online:
                raise OSError(d.error)
            total, usable = _space(str(d.path))
        except OSError:
            results.append(DescribeLogDirsResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=str(d.path),
                                                 topics=[]))
        else:
            results.append(DescribeLogDirsResult(error_code=0, log_dir=str(d.path), topics=topics, total_bytes=total,
                                                 usable_bytes=usable))
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)
