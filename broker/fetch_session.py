"""Fetch sessions (KIP-227), the leader's side: which partitions a fetch is about, and which of
them its answer must list.

Without a session every fetch lists every partition its sender follows and every answer lists
them all again. A follower of 100 partitions that has news in one pays for 100 both ways, on every
acks=all round trip. With a session the broker keeps the partitions and what it last told the
client about each; an incremental fetch lists only the partitions whose fetch position changed
(and the ones to forget), and its answer only the partitions with something to say.

The request's (session_id, session_epoch) decide:
- (0, -1): sessionless, a full fetch answered in full (librdkafka, aiokafka, every pre-v7 fetch).
- (0, 0): a full fetch that opens a session; the answer carries its id, or 0 when the cache has no
  room (the client stays on full fetches).
- (X, 0) / (X, -1): close X, then as (0, 0) / (0, -1).
- (X, N > 0): incremental. Unknown X: FETCH_SESSION_ID_NOT_FOUND; N not the session's epoch:
  INVALID_FETCH_SESSION_EPOCH; topic ids used where the session used names or the other way:
  FETCH_SESSION_TOPIC_ID_ERROR. Each is a top-level error with no partitions, and the client starts
  over with a full fetch. Otherwise the listed partitions join the session or update it, the
  forgotten ones leave it (a session left empty closes, the fetch is answered in full, id 0), and
  the epoch advances. A second request overtaking a parked one makes the parked one's answer
  INVALID_FETCH_SESSION_EPOCH, as Kafka does.

A session belongs to the connection that opened it: another connection cannot use or close it,
and it goes when that connection closes (the client's next fetch on a new connection is full in
every client we know). The cache holds at most `slots` sessions (Kafka's
max.incremental.fetch.session.cache.slots, 1000). When it is full, a new session takes the place
of the least recently used one if that has been idle for `eviction_ms` (Kafka's 120 s); failing
that, a follower's new session takes the place of the least recently used consumer session;
failing that, no session is created. Followers' sessions are never evicted for a consumer's.

No I/O here: broker/apis/fetch.py reads the partitions a context names and hands the answers back.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, PartitionData

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0  # open a session (with id 0) or close one and open another
FINAL_EPOCH = -1  # no session: sessionless (with id 0) or close one and go sessionless
MAX_EPOCH = 0x7FFFFFFF
CACHE_SLOTS = 1000
EVICTION_MS = 120_000

TopicKey = str | uuid.UUID  # the topic's name (Fetch v7-12) or its id (v13+)
Key = tuple[TopicKey, int]


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`: 1 after the last positive one, and -1 stays -1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class Told:
    """What the client last heard about a partition; -1: nothing yet (or an error since)."""

    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


@dataclass(slots=True, eq=False)
class FetchSession:
    id: int
    owner: int  # the connection it belongs to
    privileged: bool  # a follower's
    uses_ids: bool
    epoch: int  # the epoch the next incremental fetch must carry
    last_used_ms: int
    # the fetch positions in the order they are read (answered ones move to the back, so one
    # partition with a lot to say cannot keep the others out of the response's byte budget)
    partitions: dict[Key, FetchPartition] = field(default_factory=dict)
    told: dict[Key, Told] = field(default_factory=dict)


class Kind(Enum):
    SESSIONLESS = "sessionless"
    FULL = "full"  # opens a session when it is answered, if there is room
    INCREMENTAL = "incremental"
    ERROR = "error"


@dataclass(slots=True)
class FetchContext:
    """One fetch request as the session cache sees it: what to read (`partitions`, in order)."""

    kind: Kind
    partitions: list[tuple[Key, FetchPartition]]
    error: ErrorCode = ErrorCode.NONE
    session: FetchSession | None = None
    epoch: int = 0  # INCREMENTAL: the session's epoch right after this request
    owner: int = 0
    privileged: bool = False
    uses_ids: bool = False


def must_answer(told: Told, pd: PartitionData) -> bool:
    """Whether an incremental answer must list this partition."""
    return bool(pd.records) or pd.error_code != 0 or pd.diverging_epoch.epoch >= 0 \
        or pd.preferred_read_replica >= 0 or told.high_watermark != pd.high_watermark \
        or told.last_stable_offset != pd.last_stable_offset or told.log_start_offset != pd.log_start_offset


def _tell(told: Told, pd: PartitionData) -> None:
    # after an error, -1: the partition is listed again once the error has gone
    told.high_watermark = -1 if pd.error_code else pd.high_watermark
    told.last_stable_offset = pd.last_stable_offset
    told.log_start_offset = pd.log_start_offset


class FetchSessionCache:
    def __init__(self, slots: int = CACHE_SLOTS, eviction_ms: int = EVICTION_MS,
                 rng: random.Random | None = None) -> None:
        self.slots = slots
        self.eviction_ms = eviction_ms
        self.evictions = 0
        # ids need to be unique, not secret; seeded from the module's generator so that one
        # random.seed() (the simulation's, tests/helpers/dst) fixes them
        self._rng = rng or random.Random(random.getrandbits(64))  # noqa: S311
        self._sessions: dict[int, FetchSession] = {}  # least recently used first

    def __len__(self) -> int:
        return len(self._sessions)

    def count(self, *, privileged: bool) -> int:
        return sum(1 for s in self._sessions.values() if s.privileged == privileged)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def new_context(self, *, session_id: int, epoch: int, wanted: list[tuple[Key, FetchPartition]],
                    forgotten: Iterable[Key], uses_ids: bool, owner: int, privileged: bool,
                    now_ms: int) -> FetchContext:
        """Decide what a fetch request is (the module docstring) and update its session."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                s = self._sessions.get(session_id)
                if s is not None and s.owner == owner:
                    del self._sessions[session_id]
            kind = Kind.FULL if epoch == INITIAL_EPOCH else Kind.SESSIONLESS
            return FetchContext(kind, wanted, owner=owner, privileged=privileged, uses_ids=uses_ids)
        s = self._sessions.get(session_id)
        if s is None or s.owner != owner:
            return FetchContext(Kind.ERROR, [], ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if s.epoch != epoch:
            return FetchContext(Kind.ERROR, [], ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if s.uses_ids != uses_ids:
            return FetchContext(Kind.ERROR, [], ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        for key, fp in wanted:
            s.partitions[key] = fp
            s.told.setdefault(key, Told())
        for key in forgotten:
            s.partitions.pop(key, None)
            s.told.pop(key, None)
        if not s.partitions:
            del self._sessions[s.id]
            return FetchContext(Kind.SESSIONLESS, wanted)
        self._touch(s, now_ms)
        s.epoch = next_epoch(s.epoch)
        return FetchContext(Kind.INCREMENTAL, list(s.partitions.items()), session=s, epoch=s.epoch)

    def respond(self, ctx: FetchContext, answers: list[tuple[Key, PartitionData]],
                now_ms: int) -> tuple[int, ErrorCode, list[tuple[Key, PartitionData]]]:
        """The answer's session id, top-level error and partitions, from the answers for every
        partition `ctx` named; remembers what an incremental answer told the client."""
        if ctx.kind == Kind.ERROR:
            return INVALID_SESSION_ID, ctx.error, []
        if ctx.kind == Kind.SESSIONLESS:
            return INVALID_SESSION_ID, ErrorCode.NONE, answers
        if ctx.kind == Kind.FULL:
            return self._open(ctx, answers, now_ms), ErrorCode.NONE, answers
        s = ctx.session
        assert s is not None
        if s.epoch != ctx.epoch:  # a later request of the session came in while this one waited
            return INVALID_SESSION_ID, ErrorCode.INVALID_FETCH_SESSION_EPOCH, []
        out = []
        for key, pd in answers:
            told = s.told.get(key)
            if told is None or not must_answer(told, pd):
                continue
            _tell(told, pd)
            s.partitions[key] = s.partitions.pop(key)
            out.append((key, pd))
        return s.id, ErrorCode.NONE, out

    def close_owner(self, owner: int) -> None:
        """The connection `owner` closed: its sessions go with it."""
        for sid in [sid for sid, s in self._sessions.items() if s.owner == owner]:
            del self._sessions[sid]

    # ---- the cache --------------------------------------------------------------------------------
    def _open(self, ctx: FetchContext, answers: list[tuple[Key, PartitionData]], now_ms: int) -> int:
        if not self._room(ctx.privileged, now_ms):
            return INVALID_SESSION_ID
        sid = self._new_id()
        s = FetchSession(sid, ctx.owner, ctx.privileged, ctx.uses_ids, next_epoch(INITIAL_EPOCH), now_ms,
                         dict(ctx.partitions))
        for key, pd in answers:
            if key in s.partitions:
                _tell(s.told.setdefault(key, Told()), pd)
        for key in s.partitions:
            s.told.setdefault(key, Told())
        self._sessions[sid] = s
        return sid

    def _room(self, privileged: bool, now_ms: int) -> bool:
        if len(self._sessions) < self.slots:
            return True
        if self.slots <= 0:
            return False
        oldest = next(iter(self._sessions.values()))
        victim: FetchSession | None = oldest if now_ms - oldest.last_used_ms > self.eviction_ms else None
        if victim is None and privileged:
            victim = next((s for s in self._sessions.values() if not s.privileged), None)
        if victim is None:
            return False
        del self._sessions[victim.id]
        self.evictions += 1
        return True

    def _touch(self, s: FetchSession, now_ms: int) -> None:
        s.last_used_ms = now_ms
        self._sessions[s.id] = self._sessions.pop(s.id)

    def _new_id(self) -> int:
        while True:
            sid = self._rng.randint(1, MAX_EPOCH)
            if sid not in self._sessions:
                return sid
