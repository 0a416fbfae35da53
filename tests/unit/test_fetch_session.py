"""The leader's fetch session cache (broker/fetch_session.py, KIP-227), request by request: which
partitions a fetch reads, which its answer lists, the session errors, epochs and eviction."""

from __future__ import annotations

import random
import uuid

import pytest

from broker.fetch_session import (
    CACHE_SLOTS,
    EVICTION_MS,
    MAX_EPOCH,
    FetchContext,
    FetchSessionCache,
    Key,
    Kind,
    next_epoch,
)
from protocol.errors import ErrorCode
from protocol.messages.fetch import EpochEndOffset, FetchPartition, PartitionData

A, B, C = ("t", 0), ("t", 1), ("u", 0)
CONN, OTHER = 1, 2


def fp(offset: int = 0, max_bytes: int = 1000) -> FetchPartition:
    return FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)


def pd(hw: int = 10, *, lso: int | None = None, start: int = 0, records: bytes = b"", error: int = 0,
       diverging: int = -1, preferred: int = -1) -> PartitionData:
    return PartitionData(partition_index=0, error_code=error, high_watermark=hw,
                         last_stable_offset=hw if lso is None else lso, log_start_offset=start,
                         diverging_epoch=EpochEndOffset(epoch=diverging, end_offset=-1 if diverging < 0 else 5),
                         preferred_read_replica=preferred, records=records)


def ctx_of(cache: FetchSessionCache, sid: int, epoch: int, wanted: list[Key] | dict[Key, FetchPartition],
           forgotten: list[Key] = (), *, owner: int = CONN, privileged: bool = False, uses_ids: bool = False,
           now: int = 0) -> FetchContext:
    w = list(wanted.items()) if isinstance(wanted, dict) else [(k, fp()) for k in wanted]
    return cache.new_context(session_id=sid, epoch=epoch, wanted=w, forgotten=forgotten, uses_ids=uses_ids,
                             owner=owner, privileged=privileged, now_ms=now)


def opened(cache: FetchSessionCache, keys: list[Key], *, owner: int = CONN, privileged: bool = False,
           answers: dict[Key, PartitionData] | None = None, now: int = 0) -> int:
    """A full fetch (0, 0) answered: the new session's id."""
    ctx = ctx_of(cache, 0, 0, keys, owner=owner, privileged=privileged, now=now)
    assert ctx.kind == Kind.FULL
    sid, err, listed = cache.respond(ctx, [(k, (answers or {}).get(k, pd())) for k in keys], now)
    assert err == ErrorCode.NONE and [k for k, _ in listed] == keys  # a full answer lists everything
    return sid


def answered(cache: FetchSessionCache, ctx: FetchContext, answers: dict[Key, PartitionData],
             now: int = 0) -> tuple[int, ErrorCode, list[Key]]:
    """Answer every partition `ctx` reads (those not in `answers`: unchanged, HW 10)."""
    sid, err, listed = cache.respond(ctx, [(k, answers.get(k, pd())) for k, _ in ctx.partitions], now)
    return sid, err, [k for k, _ in listed]


def test_sessionless_fetch_opens_no_session_and_is_answered_in_full() -> None:
    cache = FetchSessionCache()
    ctx = ctx_of(cache, 0, -1, [A, B])
    assert ctx.kind == Kind.SESSIONLESS and [k for k, _ in ctx.partitions] == [A, B]
    assert answered(cache, ctx, {}) == (0, ErrorCode.NONE, [A, B])
    assert len(cache) == 0


def test_full_fetch_opens_a_session_and_an_incremental_one_lists_only_news() -> None:
    cache = FetchSessionCache()
    sid = opened(cache, [A, B, C])
    assert sid > 0 and len(cache) == 1
    # nothing listed, nothing new: all three are read (from the session), none is answered
    ctx = ctx_of(cache, sid, 1, [])
    assert ctx.kind == Kind.INCREMENTAL and [k for k, _ in ctx.partitions] == [A, B, C]
    assert answered(cache, ctx, {}) == (sid, ErrorCode.NONE, [])
    # records in B: only B
    assert answered(cache, ctx_of(cache, sid, 2, []), {B: pd(records=b"x")}) == (sid, ErrorCode.NONE, [B])


@pytest.mark.parametrize("news", [
    pd(hw=11, lso=10), pd(lso=9), pd(start=3), pd(error=ErrorCode.NOT_LEADER_OR_FOLLOWER),
    pd(diverging=2), pd(preferred=2), pd(records=b"x"),
], ids=["high-watermark", "last-stable-offset", "log-start", "error", "diverging-epoch", "preferred-replica",
        "records"])
def test_each_kind_of_news_is_answered_once(news: PartitionData) -> None:
    cache = FetchSessionCache()
    sid = opened(cache, [A, B])
    assert answered(cache, ctx_of(cache, sid, 1, []), {A: news})[2] == [A]
    quiet = news.records == b"" and news.error_code == 0 and news.diverging_epoch.epoch < 0 \
        and news.preferred_read_replica < 0
    if quiet:  # offsets the client has now heard are not news any more
        assert answered(cache, ctx_of(cache, sid, 2, []), {A: news})[2] == []


def test_after_an_error_the_partition_is_answered_again_when_it_clears() -> None:
    cache = FetchSessionCache()
    sid = opened(cache, [A])
    assert answered(cache, ctx_of(cache, sid, 1, []), {A: pd(error=ErrorCode.FENCED_LEADER_EPOCH)})[2] == [A]
    # the same offsets as before the error: still listed, so the client learns the error is gone
    assert answered(cache, ctx_of(cache, sid, 2, []), {A: pd()})[2] == [A]
    assert answered(cache, ctx_of(cache, sid, 3, []), {A: pd()})[2] == []


def test_what_was_told_changes_only_with_what_an_answer_carried() -> None:
    """A parked incremental fetch overtaken by the next one is answered with an error, not with
    its partitions: the HW it saw is still news for the next answer."""
    cache = FetchSessionCache()
    sid = opened(cache, [A, B])
    parked = ctx_of(cache, sid, 1, [])
    later = ctx_of(cache, sid, 2, [])
    assert answered(cache, parked, {A: pd(hw=12)}) == (0, ErrorCode.INVALID_FETCH_SESSION_EPOCH, [])
    assert answered(cache, later, {A: pd(hw=12)})[2] == [A]


def test_listed_partitions_update_or_join_the_session_and_forgotten_ones_leave() -> None:
    cache = FetchSessionCache()
    sid = opened(cache, [A, B])
    ctx = ctx_of(cache, sid, 1, {B: fp(offset=7), C: fp(offset=3)}, [A])
    assert [(k, p.fetch_offset) for k, p in ctx.partitions] == [(B, 7), (C, 3)]
    # the joiner has told nothing yet: its first answer lists it even with nothing new
    assert answered(cache, ctx, {})[2] == [C]
    # B keeps the position the last request gave it
    assert [(k, p.fetch_offset) for k, p in ctx_of(cache, sid, 2, []).partitions] == [(B, 7), (C, 3)]


def test_forgetting_every_partition_closes_the_session() -> None:
    cache = FetchSessionCache()
    sid = opened(cache, [A])
    ctx = ctx_of(cache, sid, 1, [], [A])
    assert ctx.kind == Kind.SESSIONLESS and ctx.partitions == []
    assert answered(cache, ctx, {}) == (0, ErrorCode.NONE, [])
    assert cache.get(sid) is None


def test_answered_partitions_move_to_the_back_of_the_reading_order() -> None:
    cache = FetchSessionCache()
    sid = opened(cache, [A, B, C])
    answered(cache, ctx_of(cache, sid, 1, []), {A: pd(records=b"x")})
    assert [k for k, _ in ctx_of(cache, sid, 2, []).partitions] == [B, C, A]


def test_session_errors() -> None:
    cache = FetchSessionCache()
    sid = opened(cache, [A])
    for ctx, code in [
        (ctx_of(cache, sid + 1, 1, []), ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
        (ctx_of(cache, 0, 1, []), ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
        (ctx_of(cache, sid, 1, [], owner=OTHER), ErrorCode.FETCH_SESSION_ID_NOT_FOUND),  # not its session
        (ctx_of(cache, sid, 2, []), ErrorCode.INVALID_FETCH_SESSION_EPOCH),
        (ctx_of(cache, sid, 1, [], uses_ids=True), ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR),
    ]:
        assert ctx.kind == Kind.ERROR and ctx.partitions == []
        assert answered(cache, ctx, {}) == (0, code, [])
    # none of them moved the epoch
    assert ctx_of(cache, sid, 1, []).kind == Kind.INCREMENTAL


def test_the_epoch_advances_with_every_request_and_wraps_to_one() -> None:
    cache = FetchSessionCache()
    sid = opened(cache, [A])
    for epoch in range(1, 5):
        assert ctx_of(cache, sid, epoch, []).kind == Kind.INCREMENTAL
    assert next_epoch(0) == 1 and next_epoch(MAX_EPOCH) == 1 and next_epoch(-1) == -1


def test_a_full_fetch_naming_a_session_closes_it() -> None:
    cache = FetchSessionCache()
    sid = opened(cache, [A])
    ctx = ctx_of(cache, sid, -1, [A])  # close, then sessionless
    assert ctx.kind == Kind.SESSIONLESS and cache.get(sid) is None
    sid = opened(cache, [A])
    ctx = ctx_of(cache, sid, 0, [B])  # close, then open another
    assert ctx.kind == Kind.FULL and cache.get(sid) is None
    new, _, _ = answered(cache, ctx, {})
    assert new not in (0, sid) and len(cache) == 1
    # another connection cannot close it
    ctx_of(cache, new, -1, [A], owner=OTHER)
    assert cache.get(new) is not None


def test_a_closed_connection_takes_its_sessions() -> None:
    cache = FetchSessionCache()
    mine = [opened(cache, [A]), opened(cache, [B])]
    theirs = opened(cache, [A], owner=OTHER)
    cache.close_owner(CONN)
    assert [cache.get(s) for s in mine] == [None, None] and cache.get(theirs) is not None


def test_topic_ids_key_a_session_opened_with_them() -> None:
    cache = FetchSessionCache()
    tid = uuid.uuid4()
    ctx = ctx_of(cache, 0, 0, [(tid, 0)], uses_ids=True)
    sid, _, _ = answered(cache, ctx, {})
    ctx = ctx_of(cache, sid, 1, [], uses_ids=True)
    assert [k for k, _ in ctx.partitions] == [(tid, 0)]
    assert ctx_of(cache, sid, 2, [], uses_ids=False).error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


def test_a_full_cache_opens_no_session() -> None:
    cache = FetchSessionCache(slots=1)
    opened(cache, [A])
    assert opened(cache, [B], owner=OTHER) == 0  # answered in full, without a session
    assert len(cache) == 1


def test_a_session_idle_past_the_eviction_time_gives_way() -> None:
    cache = FetchSessionCache(slots=2)
    idle = opened(cache, [A], now=0)
    busy = opened(cache, [B], now=0)
    ctx_of(cache, busy, 1, [], now=EVICTION_MS)
    assert opened(cache, [C], owner=OTHER, now=EVICTION_MS) == 0  # `idle` not idle long enough yet
    new = opened(cache, [C], owner=OTHER, now=EVICTION_MS + 1)
    assert new > 0 and cache.get(idle) is None and cache.get(busy) is not None
    assert cache.evictions == 1


def test_a_follower_session_evicts_a_consumer_one_and_never_the_other_way() -> None:
    cache = FetchSessionCache(slots=2)
    follower = opened(cache, [A], privileged=True)
    consumer = opened(cache, [B])
    assert opened(cache, [C], owner=OTHER) == 0  # a consumer cannot push anyone out
    second = opened(cache, [C], owner=OTHER, privileged=True)
    assert second > 0 and cache.get(consumer) is None and cache.get(follower) is not None
    # only followers left: a third follower finds no room either
    assert opened(cache, [C], owner=3, privileged=True) == 0


def test_session_ids_are_unique_and_positive() -> None:
    cache = FetchSessionCache(rng=random.Random(1))
    ids = {opened(cache, [A], owner=i) for i in range(200)}
    assert len(ids) == 200 and min(ids) > 0
    assert CACHE_SLOTS == 1000  # Kafka's max.incremental.fetch.session.cache.slots default
