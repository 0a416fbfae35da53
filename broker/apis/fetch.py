"""Fetch (1): whole stored batches from the requested offsets, long-polling for min_bytes.

read_uncommitted reads up to the high watermark; read_committed up to the last stable offset and
lists the aborted transactions that overlap what is returned, so the consumer can drop them
(docs/transactions.md).

Fetch sessions (v7+, KIP-227; broker/fetch_session.py decides): a fetch with session epoch 0 opens
one, and then an incremental fetch lists only the partitions whose position changed. Every fetch
still long-polls on every partition of its session (and a follower's position is recorded for all
of them); an incremental one reads only the partitions that may have news (`_quiet`), and its
answer lists only the partitions with something to say (records, a moved high watermark, last
stable offset or log start, an error, a divergence). Epoch -1 (librdkafka, aiokafka) is a sessionless
full fetch, as every fetch before v7.

A fetch with a replica id (v0-14 `replica_id`, v15+ `replica_state`) on the inter-broker listener is a
follower copying its leader: it reads up to the log end, is answered with the divergence point instead
of records when its last fetched epoch parts from ours (Fetch v12+, KIP-320), and tells the leader how
far the follower has got — the high watermark moves, the follower may rejoin the ISR.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
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
from storage.faults import broken

from ..context import BrokerContext, ClientInfo
from ..fetch_session import FINAL_EPOCH, INVALID_SESSION_ID, FetchContext, Key, Kind, Told, TopicKey
from ..partition import Isolation, wait_for_change

if TYPE_CHECKING:
    from ..partition import Partition
    from ..topics import Topic

KEY = 1
ORDERED = False
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


def _topic(ctx: BrokerContext, key: TopicKey) -> Topic | None:
    return ctx.topics.by_id.get(key) if isinstance(key, uuid.UUID) else ctx.topics.get(key)


def _follower_fetched(ctx: BrokerContext, wanted: list[tuple[Key, FetchPartition]], replica: int,
                      broker_epoch: int) -> None:
    """Record the follower's position in every partition of its fetch, listed or (in a session)
    not: each fetch tells the leader how far the follower has got in all of them, and in which
    registration of its broker (KIP-903: the epoch an ISR change names it with)."""
    for (key, index), fp in wanted:
        t = _topic(ctx, key)
        part = t.local.get(index) if t is not None else None
        if part is None or not part.is_leader or part.check_epoch(fp.current_leader_epoch):
            continue
        if part.diverging(fp.fetch_offset, fp.last_fetched_epoch) is not None:
            continue
        change = part.on_follower_fetch(replica, fp.fetch_offset, fp.log_start_offset, broker_epoch)
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


def _quiet(part: Partition, fp: FetchPartition, told: Told, replica: bool, isolation: Isolation) -> bool:
    """Whether reading `part` could only give an answer an incremental response leaves out
    (fetch_session.must_answer): no error, no divergence, nothing to read at the fetch position,
    and the offsets the client last heard. Then the partition is not read: most of a session's
    partitions have nothing to say on most fetches, and a read costs several times this check."""
    hw, lso, start, leo = part.high_watermark, part.last_stable_offset, part.log_start_offset, part.log_end_offset
    if hw != told.high_watermark or lso != told.last_stable_offset or start != told.log_start_offset:
        return False
    if not part.is_leader or part.check_epoch(fp.current_leader_epoch):
        return False
    if replica:
        return fp.fetch_offset == leo and part.diverging(fp.fetch_offset, fp.last_fetched_epoch) is None
    return (lso if isolation is Isolation.READ_COMMITTED else hw) <= fp.fetch_offset <= leo


def may_read(ctx: BrokerContext, client: ClientInfo, replica: int) -> Callable[[str], bool]:
    """Whether the requester may read a topic, on this fetch: READ on it (Kafka's check), or for a
    follower CLUSTER_ACTION on the cluster. Asked at every read, so a READ revoked while the
    consumer's fetch session runs refuses its next fetch."""
    authz = ctx.authorizer
    if not authz.enabled:
        return lambda name: True
    if replica >= 0:
        follower = authz.allows(client, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
        return lambda name: follower
    return lambda name: authz.allows(client, AclOperation.READ, ResourceType.TOPIC, name)


class _Collected:
    """A fetch's answers as they stand, one slot per partition it names (None: no answer, a quiet
    partition of an incremental session), and the partition behind each slot."""

    __slots__ = ("answers", "parts", "total", "failed")

    def __init__(self, n: int) -> None:
        self.answers: list[PartitionData | None] = [None] * n
        self.parts: list[Partition | None] = [None] * n
        self.total = 0  # bytes of records in the answers
        self.failed = False  # reading a partition failed: answer at once

    def watched(self) -> list[Partition]:
        return [p for p in self.parts if p is not None]

    def listed(self, wanted: list[tuple[Key, FetchPartition]]) -> list[tuple[Key, PartitionData]]:
        return [(key, pd) for (key, _), pd in zip(wanted, self.answers, strict=True) if pd is not None]


def _collect(ctx: BrokerContext, req: FetchRequest, version: int, wanted: list[tuple[Key, FetchPartition]],
             replica: int = -1,
             told: dict[Key, Told] | None = None,
             readable: Callable[[str], bool] = lambda name: True,
             again: _Collected | None = None, changed: list[Partition] | None = None) -> _Collected:
    """The answer for each partition as it stands, the bytes in them, the partitions to wait
    on, and whether reading a partition failed (an offset out of range, a fenced epoch): then,
    like Kafka (`errorReadingData`), the fetch is answered at once instead of waiting. Unknown
    topics and partitions do not count: Kafka sets them aside before reading and waits for the
    rest. `told`, in an incremental session: what the client last heard of each partition; a
    partition with nothing new (`_quiet`) gets no answer, as the response would leave it out.

    With `again` (the answers before a wait that held no records) and `changed` (the partitions
    that notified during it), only the slots of those partitions are read again: the others
    answer what they answered before the wait."""
    isolation = Isolation.READ_COMMITTED if version >= 4 and req.isolation_level == READ_COMMITTED \
        and not broken("lso") else Isolation.READ_UNCOMMITTED
    budget = req.max_bytes if version >= 3 else 0x7FFFFFFF
    out = again if again is not None else _Collected(len(wanted))
    if again is not None:
        assert changed is not None and again.total == 0 and not again.failed
        touched = set(changed)
        slots: Sequence[int] = [i for i, p in enumerate(again.parts) if p is not None and p in touched]
    else:
        slots = range(len(wanted))
    first = True
    for i in slots:
        key, fp = wanted[i]
        out.answers[i] = None
        out.parts[i] = None
        topic_key, index = key
        t = _topic(ctx, topic_key)
        name = t.name if t is not None else topic_key if isinstance(topic_key, str) else None  # an unknown id: None
        if name is not None and not readable(name):
            out.answers[i] = _error(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            continue
        if t is None:
            code = ErrorCode.UNKNOWN_TOPIC_ID if isinstance(topic_key, uuid.UUID) \
                else ctx.topics.missing(topic_key, index)
            out.answers[i] = _error(index, code)
            continue
        part = t.local.get(index)
        if part is None:
            out.answers[i] = _error(index, ctx.topics.missing(t.name, index))
            continue
        out.parts[i] = part
        if told is not None and (tl := told.get(key)) is not None and _quiet(part, fp, tl, replica >= 0, isolation):
            continue
        limit = min(fp.partition_max_bytes, max(budget - out.total, 0))
        if replica >= 0:
            pd, n = _replica_read(part, fp, limit, first)
        else:
            pd, n = _read(part, fp.fetch_offset, limit, isolation, fp.current_leader_epoch, first)
        out.failed = out.failed or pd.error_code != 0 or pd.diverging_epoch.epoch >= 0  # answer at once
        if n:
            first = False
        out.total += n
        out.answers[i] = pd
    return out


def _context(ctx: BrokerContext, client: ClientInfo, req: FetchRequest, version: int, replica: int) -> FetchContext:
    """What the request asks for, through its fetch session (broker/fetch_session.py)."""
    uses_ids = version >= 13
    wanted: list[tuple[Key, FetchPartition]] = [
        ((ft.topic_id if uses_ids else ft.topic, fp.partition), fp) for ft in req.topics for fp in ft.partitions]
    forgotten: list[Key] = [(ft.topic_id if uses_ids else ft.topic, p)
                            for ft in req.forgotten_topics_data for p in ft.partitions]
    return ctx.fetch_sessions.new_context(
        session_id=req.session_id if version >= 7 else INVALID_SESSION_ID,
        epoch=req.session_epoch if version >= 7 else FINAL_EPOCH, wanted=wanted, forgotten=forgotten,
        uses_ids=uses_ids, owner=client.conn_id, privileged=replica >= 0, now_ms=ctx.clock.monotonic_ms())


def _response(session_id: int, error: ErrorCode, answers: list[tuple[Key, PartitionData]]) -> FetchResponse:
    topics: dict[TopicKey, list[PartitionData]] = {}
    for (topic_key, _), pd in answers:
        topics.setdefault(topic_key, []).append(pd)
    return FetchResponse(throttle_time_ms=0, error_code=error, session_id=session_id, responses=[
        FetchableTopicResponse(topic=k, partitions=ps) if isinstance(k, str)
        else FetchableTopicResponse(topic="", topic_id=k, partitions=ps) for k, ps in topics.items()])


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader, req: FetchRequest) -> FetchResponse:
    version = header.api_version
    deadline = ctx.clock.monotonic() + max(req.max_wait_ms, 0) / 1000
    replica = replica_of(req, version, client)
    fc = _context(ctx, client, req, version, replica)
    if fc.kind == Kind.ERROR:
        return _response(*ctx.fetch_sessions.respond(fc, [], ctx.clock.monotonic_ms()))
    readable = may_read(ctx, client, replica)
    if replica >= 0 and readable(""):
        _follower_fetched(ctx, fc.partitions, replica, req.replica_state.replica_epoch if version >= 15 else -1)
    told = fc.session.told if fc.kind == Kind.INCREMENTAL and fc.session else None
    got = _collect(ctx, req, version, fc.partitions, replica, told, readable)
    watched = got.watched()
    while True:
        remaining = deadline - ctx.clock.monotonic()
        if got.total >= max(req.min_bytes, 1) or remaining <= 0 or not watched or got.failed:
            return _response(*ctx.fetch_sessions.respond(fc, got.listed(fc.partitions), ctx.clock.monotonic_ms()))
        changed = await wait_for_change(watched, remaining)
        if changed and got.total == 0:
            got = _collect(ctx, req, version, fc.partitions, replica, told, readable, got, changed)
        else:  # the time is up, or records below min_bytes: read everything again, in order
            got = _collect(ctx, req, version, fc.partitions, replica, told, readable)
        watched = got.watched()
