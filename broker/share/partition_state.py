"""One share-partition (a share group's view of one topic partition) as a sans-IO state machine.

Kafka's SharePartition, reduced to its rules. Every offset from the share-partition start offset
(SPSO, `start`) up to `next_offset` (one past the end offset, SPEO) is in flight, in one state:

    AVAILABLE     may be acquired (again): its delivery count says how often it was delivered
    ACQUIRED      delivered to one member, locked until `lock_deadline` (group.share.record.lock.duration.ms)
    ACKNOWLEDGED  ACCEPTed: done
    ARCHIVED      REJECTed, or delivered `delivery_limit` times (group.share.delivery.count.limit),
                  or no record to deliver (a control batch, an aborted transaction's record, a gap)

A fetch acquires AVAILABLE offsets and then new ones from `next_offset`; an acknowledgement moves
ACQUIRED offsets of that member to ACKNOWLEDGED (ACCEPT), AVAILABLE (RELEASE) or ARCHIVED (REJECT);
a lock that runs out, or a member that goes, makes its offsets AVAILABLE again. A RELEASE or a
timeout of an offset already delivered `delivery_limit` times archives it. The start moves past
every finished offset at the front, so the in-flight window only ever holds unfinished work.

The durable form (`snapshot` / `restore`) is Kafka's: the start offset and runs of offsets with one
state and one delivery count (ACQUIRED is written as AVAILABLE: after a crash the lock is gone).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from protocol.errors import ErrorCode
from protocol.messages.share_fetch import ACCEPT, GAP, REJECT, RELEASE


class RecordState(enum.IntEnum):
    """Kafka's RecordState values, as the share coordinator stores them."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int = 0
    member: str | None = None
    lock_deadline: int = 0


@dataclass(frozen=True, slots=True)
class BatchSpan:
    """What the shell read of one stored batch: its offsets and what decides whether they are records."""

    base: int
    last: int
    producer_id: int = -1
    transactional: bool = False
    control: bool = False


@dataclass(frozen=True, slots=True)
class Acquired:
    """A run of offsets acquired by one fetch, all with one delivery count (ShareFetch's AcquiredRecords)."""

    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class StateRun:
    """A run of offsets in one durable state with one delivery count (Kafka's state batch)."""

    first: int
    last: int
    state: int
    delivery_count: int


_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_ACK_STATE = {ACCEPT: RecordState.ACKNOWLEDGED, REJECT: RecordState.ARCHIVED, GAP: RecordState.ARCHIVED}


class SharePartitionState:
    def __init__(self, start: int, *, lock_ms: int = 30000, delivery_limit: int = 5,
                 max_in_flight: int = 2000, state_epoch: int = 0) -> None:
        self.start = start
        self.next_offset = start
        self.lock_ms = lock_ms
        self.delivery_limit = delivery_limit
        self.max_in_flight = max_in_flight  # group.share.partition.max.record.locks
        self.state_epoch = state_epoch
        self.records: dict[int, InFlight] = {}
        self.dirty = False  # changed since the last snapshot taken for the share coordinator

    # ---- fetching ----------------------------------------------------------------------------
    def next_candidate(self, after: int) -> int | None:
        """The lowest offset at or past `after` that a fetch could acquire (an AVAILABLE one, or
        the first never delivered), None when the in-flight window is full of others' records."""
        after = max(after, self.start)
        for o in range(after, self.next_offset):
            if self.records[o].state is RecordState.AVAILABLE:
                return o
        if self.next_offset - self.start >= self.max_in_flight:
            return None
        return max(after, self.next_offset)

    def acquire(self, member: str, batches: Iterable[BatchSpan], upper: int, max_records: int, now: int,
                aborted: Sequence[tuple[int, int]] = ()) -> list[Acquired]:
        """Acquire for `member` up to `max_records` offsets of the `batches` just read, below
        `upper` (the high watermark, or the last stable offset at read_committed). `aborted`:
        (producer id, first offset) of the aborted transactions the read overlaps (read_committed);
        their records, like control batches, are archived, never delivered."""
        out: list[tuple[int, int]] = []  # (offset, delivery count)
        pending = sorted(aborted, key=lambda a: a[1])
        aborting: set[int] = set()
        for b in batches:
            while pending and pending[0][1] <= b.base:
                aborting.add(pending.pop(0)[0])
            skip = b.control or (b.transactional and b.producer_id in aborting)
            if b.control and b.producer_id in aborting:
                aborting.discard(b.producer_id)
            for o in range(max(b.base, self.start), min(b.last + 1, upper)):
                if len(out) >= max_records:
                    break
                if o >= self.next_offset:
                    if not self._extend_to(o):
                        break
                    self.records[o] = InFlight(RecordState.ARCHIVED if skip else RecordState.AVAILABLE)
                    self.next_offset = o + 1
                    self.dirty = self.dirty or skip
                rec = self.records[o]
                if rec.state is not RecordState.AVAILABLE or skip:
                    continue
                rec.state, rec.member, rec.lock_deadline = RecordState.ACQUIRED, member, now + self.lock_ms
                rec.delivery_count += 1
                out.append((o, rec.delivery_count))
        self._advance()
        return _runs(out)

    def _extend_to(self, offset: int) -> bool:
        """Bring `next_offset` up to `offset`: offsets the log skipped (compacted away, or between
        batches) have no record and are archived. False when the window is full."""
        if offset - self.start >= self.max_in_flight:
            return False
        for o in range(self.next_offset, offset):
            self.records[o] = InFlight(RecordState.ARCHIVED)
        self.next_offset = max(self.next_offset, offset)
        return True

    # ---- acknowledging -----------------------------------------------------------------------
    def acknowledge(self, member: str, first: int, last: int, types: Sequence[int]) -> ErrorCode:
        """ACCEPT / RELEASE / REJECT / GAP for offsets [first, last] acquired by `member`: one type
        for the whole run, or one per offset. Nothing changes unless every offset is the member's
        and ACQUIRED (INVALID_RECORD_STATE otherwise, as Kafka answers)."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            return ErrorCode.INVALID_REQUEST
        if any(t not in (GAP, ACCEPT, RELEASE, REJECT) for t in types):
            return ErrorCode.INVALID_REQUEST
        for o in range(first, last + 1):
            rec = self.records.get(o)
            if rec is None or rec.state is not RecordState.ACQUIRED or rec.member != member:
                return ErrorCode.INVALID_RECORD_STATE
        for i, o in enumerate(range(first, last + 1)):
            t = types[0] if len(types) == 1 else types[i]
            rec = self.records[o]
            if t == RELEASE:
                self._make_available(rec)
            else:
                rec.state, rec.member = _ACK_STATE[t], None
        self.dirty = True
        self._advance()
        return ErrorCode.NONE

    def release_member(self, member: str) -> int:
        """The member left (or closed its share session): what it holds may go to the others. How many offsets."""
        n = 0
        for rec in self.records.values():
            if rec.state is RecordState.ACQUIRED and rec.member == member:
                self._make_available(rec)
                n += 1
        if n:
            self.dirty = True
            self._advance()
        return n

    # ---- locks -------------------------------------------------------------------------------
    def next_deadline(self) -> int | None:
        return min((r.lock_deadline for r in self.records.values() if r.state is RecordState.ACQUIRED), default=None)

    def expire(self, now: int) -> int:
        """Locks due by `now` run out: those offsets are AVAILABLE again (or archived at the limit)."""
        n = 0
        for rec in self.records.values():
            if rec.state is RecordState.ACQUIRED and rec.lock_deadline <= now:
                self._make_available(rec)
                n += 1
        if n:
            self.dirty = True
            self._advance()
        return n

    def _make_available(self, rec: InFlight) -> None:
        rec.member = None
        rec.state = RecordState.ARCHIVED if rec.delivery_count >= self.delivery_limit else RecordState.AVAILABLE

    def _advance(self) -> None:
        while self.start < self.next_offset and self.records[self.start].state in _DONE:
            del self.records[self.start]
            self.start += 1

    def move_start(self, offset: int) -> None:
        """The log's start moved past `offset` (retention, DeleteRecords): what lay below is gone."""
        if offset <= self.start:
            return
        for o in range(self.start, min(offset, self.next_offset)):
            del self.records[o]
        self.start = offset
        self.next_offset = max(self.next_offset, offset)
        self.dirty = True
        self._advance()

    # ---- durable form ------------------------------------------------------------------------
    def snapshot(self) -> tuple[int, list[StateRun]]:
        """The start offset and the in-flight offsets as runs (ACQUIRED written as AVAILABLE)."""
        runs: list[StateRun] = []
        for o in range(self.start, self.next_offset):
            rec = self.records[o]
            state = RecordState.AVAILABLE if rec.state is RecordState.ACQUIRED else rec.state
            if runs and runs[-1].last == o - 1 and runs[-1].state == state and runs[-1].delivery_count == rec.delivery_count:
                runs[-1] = StateRun(runs[-1].first, o, int(state), rec.delivery_count)
            else:
                runs.append(StateRun(o, o, int(state), rec.delivery_count))
        return self.start, runs

    def restore(self, start: int, runs: Iterable[StateRun]) -> None:
        """The state the share coordinator holds: every lock is gone, so ACQUIRED comes back AVAILABLE."""
        self.start = self.next_offset = start
        self.records = {}
        for r in sorted(runs, key=lambda r: r.first):
            state = RecordState(r.state) if r.state in RecordState._value2member_map_ else RecordState.AVAILABLE
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            for o in range(max(r.first, start), r.last + 1):
                for gap in range(self.next_offset, o):  # not in any run: nothing to deliver there
                    self.records[gap] = InFlight(RecordState.ARCHIVED)
                self.records[o] = InFlight(state, r.delivery_count)
                self.next_offset = max(self.next_offset, o + 1)
        self._advance()
        self.dirty = False

    def acquired_by(self, member: str) -> list[int]:
        return [o for o, r in self.records.items() if r.state is RecordState.ACQUIRED and r.member == member]


def _runs(acquired: list[tuple[int, int]]) -> list[Acquired]:
    out: list[Acquired] = []
    for o, count in acquired:
        if out and out[-1].last == o - 1 and out[-1].delivery_count == count:
            out[-1] = Acquired(out[-1].first, o, count)
        else:
            out.append(Acquired(o, o, count))
    return out
