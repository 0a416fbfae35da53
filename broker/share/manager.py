"""The share-partition leader's shell: the share-partitions of the partitions this broker leads.

All decisions are the state machine's (partition_state.py). This wrapper
* loads a share-partition's state on its first use here (from the share coordinator through the
  persister; a new one starts where `share.auto.offset.reset` says and is written down first),
* reads the log for a ShareFetch (whole batches, their headers only), lets the state acquire, and
  answers with the batches that hold acquired records, long-polling while there is nothing,
* applies acknowledgements and answers them only once the new state is durable (the persister's
  write returned), so an acknowledgement answered is never lost to a crash,
* runs the acquisition locks' timer, and forgets a partition's share state when it is led elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import structlog

from protocol.batch import CONTROL_FLAG, TRANSACTIONAL_FLAG, iter_batches
from protocol.clock import Clock
from protocol.errors import ErrorCode

from ..partition import Isolation, Partition, wait_for_change
from .partition_state import Acquired, BatchSpan, SharePartitionState, StateRun
from .sessions import ShareSessions

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..topics import TopicTable

log = structlog.get_logger()
Key = tuple[str, uuid.UUID, int]  # group id, topic id, partition


@dataclass(frozen=True, slots=True)
class StoredState:
    state_epoch: int
    start_offset: int
    runs: tuple[StateRun, ...]


class Persister(Protocol):
    """Where share-partition state lives durably (the share coordinator, persister.py)."""

    async def read(self, key: Key, leader_epoch: int) -> tuple[ErrorCode, StoredState | None]: ...

    async def write(self, key: Key, leader_epoch: int, state: StoredState) -> ErrorCode: ...


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    error: ErrorCode = ErrorCode.NONE
    records: bytes = b""
    acquired: tuple[Acquired, ...] = ()
    leader_epoch: int = -1


@dataclass(slots=True)
class _Entry:
    state: SharePartitionState
    leader_epoch: int
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one write to the coordinator at a time


class SharePartitions:
    def __init__(self, cfg: BrokerConfig, topics: TopicTable, clock: Clock, persister: Persister) -> None:
        self.cfg = cfg
        self.topics = topics
        self.clock = clock
        self.persister = persister
        self.sessions = ShareSessions()
        self._entries: dict[Key, _Entry] = {}
        self._loading: dict[Key, asyncio.Future[_Entry | ErrorCode]] = {}
        self._changed = asyncio.Event()  # records became available again (released, lock ran out)
        self._timer_task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._background: dict[asyncio.Task[None], None] = {}

    def start(self) -> None:
        self.topics.listeners.append(self._on_partition)
        self._timer_task = asyncio.get_running_loop().create_task(self._timer_loop())

    async def stop(self) -> None:
        for t in (self._timer_task, *self._background):
            if t is not None:
                t.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await t

    def _on_partition(self, topic: str, partition: Partition, leads: bool) -> None:
        """Led elsewhere (or anew here, under another epoch): the share state held is stale; it is
        read back from the share coordinator on next use."""
        info = self.topics.image.topics.get(topic)
        if info is None:
            return
        for key in [k for k, e in self._entries.items() if k[1] == info.topic_id and k[2] == partition.index
                    and (not leads or e.leader_epoch != partition.leader_epoch)]:
            del self._entries[key]

    def partition(self, topic_id: uuid.UUID, index: int) -> tuple[ErrorCode, Partition | None]:
        t = self.topics.by_id.get(topic_id)
        if t is None:
            return ErrorCode.UNKNOWN_TOPIC_ID, None
        p = t.local.get(index)
        if p is None:
            return self.topics.missing(t.name, index), None
        if not p.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, p
        return ErrorCode.NONE, p

    # ---- loading -----------------------------------------------------------------------------
    async def _entry(self, key: Key, p: Partition) -> _Entry | ErrorCode:
        e = self._entries.get(key)
        if e is not None and e.leader_epoch == p.leader_epoch:
            return e
        fut = self._loading.get(key)
        if fut is None:
            fut = self._loading[key] = asyncio.get_running_loop().create_future()
            try:
                fut.set_result(await self._load(key, p))
            except Exception as exc:  # a bug: every waiter gets the error, the next use tries again
                log.error("loading a share-partition failed", group=key[0], exc_info=exc)
                fut.set_result(ErrorCode.UNKNOWN_SERVER_ERROR)
            finally:
                del self._loading[key]
        return await asyncio.shield(fut)

    async def _load(self, key: Key, p: Partition) -> _Entry | ErrorCode:
        epoch = p.leader_epoch
        err, stored = await self.persister.read(key, epoch)
        if err:
            return err
        st = SharePartitionState(0, lock_ms=self.cfg.group_share_record_lock_duration_ms,
                                 delivery_limit=self.cfg.group_share_delivery_count_limit,
                                 max_in_flight=self.cfg.group_share_partition_max_record_locks)
        if stored is not None:
            st.state_epoch = stored.state_epoch
            st.restore(stored.start_offset, stored.runs)
            st.move_start(p.log_start_offset)
        else:
            latest = p.last_stable_offset if self._isolation() is Isolation.READ_COMMITTED else p.high_watermark
            start = p.log_start_offset if self.cfg.share_auto_offset_reset == "earliest" else latest
            st.restore(start, ())
            err = await self.persister.write(key, epoch, StoredState(0, start, ()))
            if err:
                return err
        if p.leader_epoch != epoch or not p.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        e = self._entries[key] = _Entry(st, epoch)
        return e

    def _isolation(self) -> Isolation:
        return Isolation.READ_COMMITTED if self.cfg.share_isolation_level == "read_committed" \
            else Isolation.READ_UNCOMMITTED

    # ---- fetching ----------------------------------------------------------------------------
    async def fetch(self, group: str, member: str, wanted: Sequence[tuple[uuid.UUID, int]], max_records: int,
                    max_bytes: int, max_wait_ms: int, min_bytes: int) -> dict[tuple[uuid.UUID, int], FetchedPartition]:
        """Acquire records for `member` from the partitions `wanted`, waiting up to `max_wait_ms`
        while none could be acquired."""
        deadline = self.clock.monotonic() + max(max_wait_ms, 0) / 1000
        while True:
            out: dict[tuple[uuid.UUID, int], FetchedPartition] = {}
            parts: list[Partition] = []
            budget, records_left = max_bytes, max(max_records, 1)
            total = 0
            for tid, index in wanted:
                err, p = self.partition(tid, index)
                if err or p is None:
                    out[(tid, index)] = FetchedPartition(err or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    continue
                e = await self._entry((group, tid, index), p)
                if isinstance(e, ErrorCode):
                    out[(tid, index)] = FetchedPartition(e)
                    continue
                parts.append(p)
                fp = self._acquire(e, p, member, records_left, max(budget - total, 1))
                n = sum(a.last - a.first + 1 for a in fp.acquired)
                records_left -= n
                total += len(fp.records)
                out[(tid, index)] = fp
                if records_left <= 0:
                    break
            acquired_any = any(fp.acquired for fp in out.values())
            failed = any(fp.error for fp in out.values())
            remaining = deadline - self.clock.monotonic()
            if acquired_any or failed or remaining <= 0 or not parts:
                return out
            await self._wait(parts, remaining)

    async def _wait(self, parts: list[Partition], timeout_s: float) -> None:
        """Until a partition gets new records, records become available again, or the time is up."""
        self._changed.clear()
        waiters = [asyncio.ensure_future(wait_for_change(parts, timeout_s)), asyncio.ensure_future(self._changed.wait())]
        try:
            await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()

    def _acquire(self, e: _Entry, p: Partition, member: str, max_records: int, max_bytes: int) -> FetchedPartition:
        """Read from the first offset the member could acquire and acquire what the read holds,
        reading on past batches held by other members until something is acquired or the budget
        (bytes, records) or the log runs out."""
        st = e.state
        isolation = self._isolation()
        pos = st.next_candidate(st.start)
        chunks: list[bytes] = []
        acquired: list[Acquired] = []
        size = 0
        while pos is not None and max_records > 0 and size < max_bytes:
            r = p.read(pos, max_bytes - size, isolation)
            if r.error:
                return FetchedPartition(r.error, leader_epoch=p.leader_epoch)
            if not r.records:
                break
            data = bytes(r.records)
            spans = [(pos_, h) for pos_, h in iter_batches(data, strict=False)]
            upper = r.last_stable_offset if isolation is Isolation.READ_COMMITTED else r.high_watermark
            got = st.acquire(member, [BatchSpan(h.base_offset, h.base_offset + h.last_offset_delta, h.producer_id,
                                                bool(h.attributes & TRANSACTIONAL_FLAG),
                                                bool(h.attributes & CONTROL_FLAG)) for _, h in spans],
                             upper, max_records, self.clock.monotonic_ms(),
                             [(a.producer_id, a.first_offset) for a in r.aborted or ()])
            for bpos, h in spans:  # only the batches that hold acquired records go back
                last = h.base_offset + h.last_offset_delta
                if any(a.first <= last and h.base_offset <= a.last for a in got):
                    chunk = data[bpos:bpos + h.batch_length + 12]
                    chunks.append(chunk)
                    size += len(chunk)
            acquired += got
            max_records -= sum(a.last - a.first + 1 for a in got)
            if got:
                break  # one read's worth per fetch: acquired records must not wait on more reading
            pos = st.next_candidate(r.next_offset)
            if pos is not None and pos >= upper:
                break
        if st.dirty:
            self._persist_later(e, p)
        self._wake.set()
        return FetchedPartition(ErrorCode.NONE, b"".join(chunks), tuple(acquired), p.leader_epoch)

    # ---- acknowledging -----------------------------------------------------------------------
    async def acknowledge(self, group: str, member: str, tid: uuid.UUID, index: int,
                          batches: Sequence[tuple[int, int, Sequence[int]]]) -> ErrorCode:
        """Apply the member's acknowledgements of one partition and answer once they are durable."""
        err, p = self.partition(tid, index)
        if err or p is None:
            return err or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        e = await self._entry((group, tid, index), p)
        if isinstance(e, ErrorCode):
            return e
        result = ErrorCode.NONE
        for first, last, types in batches:
            code = e.state.acknowledge(member, first, last, types)
            result = result or code
        self._changed.set()
        code = await self._persist(e, p, group, tid, index)
        return result or code

    async def release(self, group: str, member: str, keys: Sequence[tuple[uuid.UUID, int]]) -> None:
        """The member's share session closed: what it still holds goes back to the others."""
        for tid, index in keys:
            e = self._entries.get((group, tid, index))
            if e is not None and e.state.release_member(member):
                self._changed.set()
                _, p = self.partition(tid, index)
                if p is not None:
                    await self._persist(e, p, group, tid, index)

    async def _persist(self, e: _Entry, p: Partition, group: str, tid: uuid.UUID, index: int) -> ErrorCode:
        """Write the share-partition's state to the share coordinator (one write at a time: each
        carries the whole state, so the last one written is the newest)."""
        async with e.lock:
            if not e.state.dirty:
                return ErrorCode.NONE
            e.state.dirty = False
            start, runs = e.state.snapshot()
            code = await self.persister.write((group, tid, index), e.leader_epoch,
                                              StoredState(e.state.state_epoch, start, tuple(runs)))
            if code:
                e.state.dirty = True
                log.warning("writing share-partition state failed", group=group, partition=index, error=code)
            return code

    def _persist_later(self, e: _Entry, p: Partition) -> None:
        key = next((k for k, v in self._entries.items() if v is e), None)
        if key is None:
            return
        task = asyncio.get_running_loop().create_task(self._persist_quietly(e, p, key))
        self._background[task] = None
        task.add_done_callback(lambda done: self._background.pop(done, None))

    async def _persist_quietly(self, e: _Entry, p: Partition, key: Key) -> None:
        await self._persist(e, p, *key)

    # ---- acquisition locks -------------------------------------------------------------------
    async def _timer_loop(self) -> None:
        while True:
            self._wake.clear()
            now = self.clock.monotonic_ms()
            deadlines = [d for e in self._entries.values() if (d := e.state.next_deadline()) is not None]
            due = min(deadlines, default=None)
            if due is None or due > now:
                timeout = None if due is None else (due - now) / 1000
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
                continue
            for key, e in list(self._entries.items()):
                if e.state.expire(self.clock.monotonic_ms()):
                    self._changed.set()
                    _, p = self.partition(key[1], key[2])
                    if p is not None:
                        self._persist_later(e, p)


def names_of(topics: TopicTable) -> Callable[[uuid.UUID], str | None]:
    def name(tid: uuid.UUID) -> str | None:
        t = topics.by_id.get(tid)
        return t.name if t is not None else None
    return name
