"""OffsetFetch (9): a group's committed positions.

require_stable (v7+) is how a read_committed consumer avoids starting from an offset that an open
transaction is about to replace: such partitions answer UNSTABLE_OFFSET_COMMIT and the client
retries. Before v2 there is no top-level error, so coordinator errors go on every partition;
v8 asks for several groups at once, each with its own error.
"""

from __future__ import annotations

from collections import defaultdict

from protocol.headers import RequestHeader
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from protocol.topic_partition import TopicPartition

from ..context import BrokerContext, ClientInfo
from ..group.model import FetchedOffset

KEY = 9
ORDERED = False


def _by_topic(offsets: list[FetchedOffset]) -> dict[str, list[FetchedOffset]]:
    out: dict[str, list[FetchedOffset]] = defaultdict(list)
    for o in offsets:
        out[o.topic].append(o)
    return out


def _fetch(ctx: BrokerContext, group_id: str, partitions: list[TopicPartition] | None,
           require_stable: bool) -> tuple[int, list[FetchedOffset]]:
    err, offsets = ctx.groups.fetch_offsets(group_id, partitions, require_stable)
    if err and partitions is not None:
        offsets = [FetchedOffset(t, p, -1, -1, "", err) for t, p in partitions]
    return err, offsets


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: OffsetFetchRequest) -> OffsetFetchResponse:
    await ctx.groups.ensure_topic()
    v = header.api_version
    stable = req.require_stable if v >= 7 else False
    if v >= 8:
        groups = []
        for g in req.groups:
            parts = None if g.topics is None else [TopicPartition(t.name, p) for t in g.topics for p in t.partition_indexes]
            err, offsets = _fetch(ctx, g.group_id, parts, stable)
            groups.append(OffsetFetchResponseGroup(group_id=g.group_id, error_code=err, topics=[] if err else [
                OffsetFetchResponseTopics(name=name, partitions=[
                    OffsetFetchResponsePartitions(partition_index=o.partition, committed_offset=o.offset,
                                                  committed_leader_epoch=o.leader_epoch, metadata=o.metadata,
                                                  error_code=o.error)
                    for o in offs])
                for name, offs in _by_topic(offsets).items()
            ]))
        return OffsetFetchResponse(groups=groups)
    parts = None if req.topics is None else [TopicPartition(t.name, p) for t in req.topics for p in t.partition_indexes]
    err, offsets = _fetch(ctx, req.group_id, parts, stable)
    topics = [
        OffsetFetchResponseTopic(name=name, partitions=[
            OffsetFetchResponsePartition(partition_index=o.partition, committed_offset=o.offset,
                                         committed_leader_epoch=o.leader_epoch, metadata=o.metadata,
                                         error_code=o.error)
            for o in offs])
        for name, offs in _by_topic(offsets).items()
    ]
    return OffsetFetchResponse(topics=topics, error_code=err)
