"""OffsetFetch (9): a group's committed positions.

require_stable (v7+) is how a read_committed consumer avoids starting from an offset that an open
transaction is about to replace: such partitions answer UNSTABLE_OFFSET_COMMIT and the client
retries. Before v2 there is no top-level error, so coordinator errors go on every partition;
v8 asks for several groups at once, each with its own error.
"""

from __future__ import annotations

from collections import defaultdict

from protocol.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
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


def _fetch(ctx: BrokerContext, client: ClientInfo, group_id: str, partitions: list[TopicPartition] | None,
           require_stable: bool, member_id: str | None = None,
           member_epoch: int = -1) -> tuple[int, list[FetchedOffset]]:
    """Kafka's checks first: DESCRIBE on the group, then on each topic — a partition of a topic
    the requester may not DESCRIBE is refused when named, left out when all are asked for."""
    authz = ctx.authorizer
    err: int
    offsets: list[FetchedOffset]
    if not authz.allows(client, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        err, offsets = ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    else:
        named = None if partitions is None else {t for t, _ in partitions}
        hidden = set() if named is None else named - authz.allowed(client, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                                   named)
        asked = None if partitions is None else [tp for tp in partitions if tp[0] not in hidden]
        err, offsets = (ctx.groups.fetch_offsets(group_id, asked, require_stable, member_id, member_epoch)
                        if asked != [] else (0, []))
        if partitions is None:
            shown = authz.allowed(client, AclOperation.DESCRIBE, ResourceType.TOPIC, {o.topic for o in offsets})
            offsets = [o for o in offsets if o.topic in shown]
        elif not err:
            refused = [FetchedOffset(t, p, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                       for t, p in partitions if t in hidden]
            offsets = offsets + refused
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
            member = (g.member_id, g.member_epoch) if v >= 9 else (None, -1)  # a consumer group's member (KIP-848)
            err, offsets = _fetch(ctx, client, g.group_id, parts, stable, *member)
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
    err, offsets = _fetch(ctx, client, req.group_id, parts, stable)
    topics = [
        OffsetFetchResponseTopic(name=name, partitions=[
            OffsetFetchResponsePartition(partition_index=o.partition, committed_offset=o.offset,
                                         committed_leader_epoch=o.leader_epoch, metadata=o.metadata,
                                         error_code=o.error)
            for o in offs])
        for name, offs in _by_topic(offsets).items()
    ]
    return OffsetFetchResponse(topics=topics, error_code=err)
