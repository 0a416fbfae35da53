"""ShareFetch (78): a share-group member acknowledges what it processed and acquires more records of
the partitions of its share session (broker/share: the sessions, the share-partitions, their state).

Kafka's checks: READ on the group, READ on each topic. The acknowledgements are applied (and made
durable) before the fetch, so records released by them may be acquired again by this very fetch.
"""

from __future__ import annotations

import uuid

from protocol.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.share_fetch import (
    AcquiredRecords,
    LeaderIdAndEpoch,
    ShareFetchPartitionData,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareFetchTopic,
    ShareFetchTopicResponse,
)

from ..context import BrokerContext, ClientInfo
from ..share.manager import FetchedPartition, SharePartitions

KEY = 78
ORDERED = False
TP = tuple[uuid.UUID, int]
Acks = dict[TP, list[tuple[int, int, list[int]]]]


def current_leader(ctx: BrokerContext, tid: uuid.UUID, index: int) -> LeaderIdAndEpoch:
    t = ctx.topics.by_id.get(tid)
    info = ctx.topics.image.topics.get(t.name) if t is not None else None
    if info is None or index >= len(info.partitions):
        return LeaderIdAndEpoch()
    p = info.partitions[index]
    return LeaderIdAndEpoch(leader_id=p.leader, leader_epoch=p.leader_epoch)


def acks_of(topics: list[ShareFetchTopic]) -> Acks:
    acks: Acks = {}
    for t in topics:
        for p in t.partitions:
            if p.acknowledgement_batches:
                acks.setdefault((t.topic_id, p.partition_index), []).extend(
                    (b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in p.acknowledgement_batches)
    return acks


def unreadable(ctx: BrokerContext, client: ClientInfo, keys: list[TP]) -> set[TP]:
    """The partitions of topics the member may not READ (Kafka's TOPIC_AUTHORIZATION_FAILED)."""
    if not ctx.authorizer.enabled:
        return set()
    out = set()
    for tid, index in keys:
        t = ctx.topics.by_id.get(tid)
        if t is not None and not ctx.authorizer.allows(client, AclOperation.READ, ResourceType.TOPIC, t.name):
            out.add((tid, index))
    return out


async def apply_acks(shares: SharePartitions, group: str, member: str, acks: Acks,
                     refused: set[TP]) -> dict[TP, ErrorCode]:
    out: dict[TP, ErrorCode] = {}
    for (tid, index), batches in acks.items():
        if (tid, index) in refused:
            out[(tid, index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        out[(tid, index)] = await shares.acknowledge(group, member, tid, index, batches)
    return out


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: ShareFetchRequest) -> ShareFetchResponse:
    shares = ctx.shares
    lock_ms = ctx.config.group_share_record_lock_duration_ms
    if shares is None:
        return ShareFetchResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, acquisition_lock_timeout_ms=lock_ms)
    group, member = req.group_id or "", req.member_id or ""
    if not group or not member:
        return ShareFetchResponse(error_code=ErrorCode.INVALID_REQUEST, acquisition_lock_timeout_ms=lock_ms,
                                  error_message="GroupId and MemberId must be set.")
    if not ctx.authorizer.allows(client, AclOperation.READ, ResourceType.GROUP, group):
        return ShareFetchResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, acquisition_lock_timeout_ms=lock_ms)
    listed = [(t.topic_id, p.partition_index) for t in req.topics for p in t.partitions]
    forgotten = [(t.topic_id, p) for t in req.forgotten_topics_data for p in t.partitions]
    step = shares.sessions.fetch((group, member), req.share_session_epoch, listed, forgotten)
    if step.error:
        return ShareFetchResponse(error_code=step.error, acquisition_lock_timeout_ms=lock_ms)
    acks = acks_of(req.topics)
    refused = unreadable(ctx, client, list(dict.fromkeys([*step.partitions, *acks])))
    ack_results = await apply_acks(shares, group, member, acks, refused)
    fetched: dict[TP, FetchedPartition] = {}
    if step.closing:
        await shares.release(group, member, step.partitions)
    elif req.max_records > 0:
        wanted = [k for k in step.partitions if k not in refused]
        fetched = await shares.fetch(group, member, wanted, req.max_records, req.max_bytes, req.max_wait_ms,
                                     req.min_bytes)
    topics: dict[uuid.UUID, list[ShareFetchPartitionData]] = {}
    for key in dict.fromkeys([*fetched, *ack_results, *(k for k in step.partitions if k in refused)]):
        tid, index = key
        fp = fetched.get(key, FetchedPartition())
        err = ErrorCode.TOPIC_AUTHORIZATION_FAILED if key in refused else fp.error
        ack = ack_results.get(key, ErrorCode.NONE)
        leader = current_leader(ctx, tid, index) if err == ErrorCode.NOT_LEADER_OR_FOLLOWER else LeaderIdAndEpoch()
        topics.setdefault(tid, []).append(ShareFetchPartitionData(
            partition_index=index, error_code=err, acknowledge_error_code=ack, current_leader=leader,
            records=fp.records, acquired_records=[AcquiredRecords(first_offset=a.first, last_offset=a.last,
                                                                  delivery_count=a.delivery_count)
                                                  for a in fp.acquired]))
    return ShareFetchResponse(acquisition_lock_timeout_ms=lock_ms, responses=[
        ShareFetchTopicResponse(topic_id=tid, partitions=ps) for tid, ps in topics.items()])
