"""The consumer: assign or subscribe, then iterate.

    async with Consumer("localhost:9092", group_id="g", isolation_level="read_committed") as c:
        c.subscribe(["topic"])
        async for record in c:
            ...

`getmany()` returns what is buffered (waiting up to a timeout for something); `async for` yields
records one by one. Positions advance as records are handed out; `commit()` commits them (or the
offsets given). With a group, rebalances happen inside getmany/iteration, where the rebalance
listener is called.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

from protocol.clock import SYSTEM_CLOCK, Clock

from .cluster import Cluster
from .errors import ConsumerStoppedError, IllegalStateError, KafkaClientError
from .fetcher import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Fetcher
from .isolation import FetchedBatches
from .security import Security
from .structs import ConsumerGroupMetadata, ConsumerRecord, OffsetAndMetadata, TopicPartition
from .subscription import EARLIEST, LATEST, SubscriptionState

if TYPE_CHECKING:
    from .group import GroupMember, RebalanceListener
    from .group_consumer import ConsumerGroupMember

T = TypeVar("T")


class Consumer:
    """An asyncio Kafka consumer. Use as `async with`, or call `start()` and `close()`."""

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        *,
        group_id: str | None = None,
        client_id: str = "ketch-consumer",
        isolation_level: str = "read_uncommitted",
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        group_protocol: str = "classic",
        group_remote_assignor: str | None = None,
        assignors: Sequence[str] = ("range", "cooperative-sticky"),
        session_timeout_ms: int = 45_000,
        rebalance_timeout_ms: int = 300_000,
        heartbeat_interval_ms: int = 3_000,
        group_instance_id: str | None = None,
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 52_428_800,
        max_partition_fetch_bytes: int = 1_048_576,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        check_crcs: bool = True,
        clock: Clock = SYSTEM_CLOCK,
        security: Security | None = None,
    ) -> None:
        if group_protocol not in ("classic", "consumer"):
            raise ValueError(f"group_protocol must be classic or consumer, not {group_protocol!r}")
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"isolation_level must be read_uncommitted or read_committed, not {isolation_level!r}")
        self.group_id = group_id
        self.read_committed = isolation_level == "read_committed"
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval = auto_commit_interval_ms / 1000
        self.request_timeout = request_timeout_ms / 1000
        self._cluster = Cluster(bootstrap_servers, client_id=client_id, request_timeout=self.request_timeout,
                                retry_backoff=retry_backoff_ms / 1000, allow_auto_topic_creation=False, clock=clock,
                                security=security)
        self._clock = clock
        self._subs = SubscriptionState(auto_offset_reset)
        self._fetcher = Fetcher(self._cluster, self._subs, read_committed=self.read_committed,
                                max_wait_ms=fetch_max_wait_ms, min_bytes=fetch_min_bytes, max_bytes=fetch_max_bytes,
                                max_partition_bytes=max_partition_fetch_bytes, check_crcs=check_crcs)
        self._fetcher.position_resolver = self._resolve_positions
        # The group protocols are imported only by consumers that join a group: the Spark source's
        # planner and readers, in processes that start per query, consume without one.
        self._group: GroupMember | ConsumerGroupMember | None = None
        if group_id is not None and group_protocol == "consumer":
            from .group_consumer import ConsumerGroupMember

            # KIP-848: the coordinator assigns (group_remote_assignor: "uniform" or "range", None for
            # its default); the session timeout and heartbeat interval are the broker's
            self._group = ConsumerGroupMember(
                self._cluster, group_id, group_instance_id=group_instance_id, server_assignor=group_remote_assignor,
                rebalance_timeout_ms=rebalance_timeout_ms, retry_backoff=retry_backoff_ms / 1000,
                require_stable=self.read_committed)
        elif group_id is not None:
            from .assignors import make_assignors
            from .group import GroupMember

            self._group = GroupMember(
                self._cluster, group_id, assignors=make_assignors(assignors), session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms, heartbeat_interval_ms=heartbeat_interval_ms,
                group_instance_id=group_instance_id, retry_backoff=retry_backoff_ms / 1000,
                require_stable=self.read_committed)
        if self._group is not None:
            self._group.on_assigned = self._on_assigned
            self._group.on_revoked = self._on_revoked
            self._group.on_lost = self._on_lost
        self._listener: RebalanceListener | None = None
        self._started = False
        self._closed = False
        self._next_auto_commit = 0.0
        self._iter_buffer: list[ConsumerRecord] = []
        self._iter_index = 0

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self._started:
            return
        await self._cluster.refresh_metadata()
        self._started = True
        self._next_auto_commit = self._clock.monotonic() + self.auto_commit_interval
        self._fetcher.start()

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Commit (with auto-commit), leave the group, close connections."""
        if self._closed:
            return
        self._closed = True
        if self._started:
            if self.enable_auto_commit and self._group is not None and self._group.generation_id >= 0:
                with contextlib.suppress(KafkaClientError, OSError, TimeoutError):
                    await self.commit()
            await self._fetcher.close()
            if self._group is not None:
                await self._group.leave()
        self._fetcher.data_ready.set()
        await self._cluster.close()

    def _check(self) -> None:
        if self._closed:
            raise ConsumerStoppedError("consumer is closed")
        if not self._started:
            raise IllegalStateError("consumer not started: use `async with Consumer(...)` or await start()")

    # ------------------------------------------------------------------ assignment
    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (no group rebalancing)."""
        if self._subs.subscribed:
            raise IllegalStateError("assign() after subscribe(): call unsubscribe() first")
        tps = {TopicPartition(*tp) for tp in partitions}
        self._subs.user_assigned = True
        removed = self._subs.assigned - tps
        self._subs.assign(tps)
        self._fetcher.discard(removed)
        self._drop_iterated(removed)
        self._cluster.wanted_topics |= {tp.topic for tp in tps}
        self._fetcher.wake()

    def subscribe(self, topics: Iterable[str] = (), listener: RebalanceListener | None = None, *,
                  pattern: str | None = None) -> None:
        """Join the consumer group and read the partitions it assigns us from `topics`, or (with
        group_protocol="consumer") from every topic whose name matches the regular expression
        `pattern` (matched by the coordinator, topics created later included)."""
        if self._group is None:
            raise IllegalStateError("subscribe() needs a group_id")
        if self._subs.user_assigned:
            raise IllegalStateError("subscribe() after assign(): call unsubscribe() first")
        topics = tuple(sorted(set(topics)))
        if not topics and pattern is None:
            raise ValueError("subscribe() needs topics or a pattern")
        self._group.subscribe(topics, pattern)
        self._subs.topics, self._subs.pattern = topics, pattern
        self._listener = listener
        self._cluster.wanted_topics |= set(topics)

    def unsubscribe(self) -> None:
        self._subs.topics, self._subs.pattern = (), None
        self._subs.user_assigned = False
        self._subs.assign(set())
        self._fetcher.discard()
        if self._group is not None:
            self._group.unsubscribe()

    def assignment(self) -> set[TopicPartition]:
        return self._subs.assigned

    def subscription(self) -> tuple[str, ...]:
        return self._subs.topics

    @property
    def member_id(self) -> str:
        """Our member id in the group ("" before the first join of a classic group)."""
        if self._group is None:
            raise IllegalStateError("no group_id")
        return self._group.member_id

    def group_metadata(self) -> ConsumerGroupMetadata:
        """For Producer.send_offsets_to_transaction: who we are in the group right now."""
        if self._group is None:
            raise IllegalStateError("no group_id")
        return self._group.metadata()

    async def _on_assigned(self, added: set[TopicPartition]) -> None:
        self._subs.add(added)
        self._fetcher.wake()
        if self._listener is not None:
            res = self._listener.on_partitions_assigned(added)
            if res is not None:
                await res

    async def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        if self._listener is not None:
            res = self._listener.on_partitions_revoked(revoked)
            if res is not None:
                await res
        if self.enable_auto_commit:
            with contextlib.suppress(KafkaClientError):
                await self._commit_positions(revoked)
        self._subs.remove(revoked)
        self._fetcher.discard(revoked)
        self._drop_iterated(revoked)

    async def _on_lost(self, lost: set[TopicPartition]) -> None:
        fn = getattr(self._listener, "on_partitions_lost", None)
        if fn is not None:
            res = fn(lost)
            if res is not None:
                await res
        elif self._listener is not None:
            res = self._listener.on_partitions_revoked(lost)
            if res is not None:
                await res
        self._subs.remove(lost)
        self._fetcher.discard(lost)
        self._drop_iterated(lost)

    # ------------------------------------------------------------------ positions
    def seek(self, tp: TopicPartition, offset: int) -> None:
        """The next record handed out for `tp` will be the one at `offset`."""
        self._subs.seek(tp, offset)
        self._fetcher.discard({tp})
        self._drop_iterated({tp})
        self._fetcher.wake()

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        for tp in tps or tuple(self._subs.assigned):
            self._subs.request_reset(tp, EARLIEST)
            self._fetcher.discard({tp})
            self._drop_iterated({tp})
        self._fetcher.wake()

    def seek_to_end(self, *tps: TopicPartition) -> None:
        for tp in tps or tuple(self._subs.assigned):
            self._subs.request_reset(tp, LATEST)
            self._fetcher.discard({tp})
            self._drop_iterated({tp})
        self._fetcher.wake()

    async def position(self, tp: TopicPartition) -> int:
        """Offset of the next record to be handed out (resolving a pending reset first)."""
        self._check()
        while (pos := self._subs.state(tp).position) is None:
            await self._resolve_positions([tp])
        return pos

    async def committed(self, tp: TopicPartition) -> int | None:
        """The group's committed offset for `tp`, None if nothing was committed."""
        self._check()
        if self._group is None:
            raise IllegalStateError("committed() needs a group_id")
        om = (await self._group.fetch_committed([tp], self.request_timeout))[tp]
        return om.offset if om is not None else None

    async def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._fetcher.list_offsets(list(tps), EARLIEST_TIMESTAMP)

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """High watermarks, or last stable offsets for a read_committed consumer."""
        return await self._fetcher.list_offsets(list(tps), LATEST_TIMESTAMP)

    async def partitions_for(self, topics: Iterable[str]) -> list[TopicPartition]:
        """Every partition of `topics`, in order, from metadata fetched now (so partitions added
        since are there); a topic that does not exist raises UnknownTopicError, as
        Admin.describe_topics does."""
        self._check()
        names = list(topics)
        await self._cluster.refresh_metadata(names)
        return [TopicPartition(n, p) for n in names for p in sorted(self._cluster.described(n).partitions)]

    def highwater(self, tp: TopicPartition) -> int:
        return self._subs.state(tp).high_watermark

    def last_stable_offset(self, tp: TopicPartition) -> int:
        return self._subs.state(tp).last_stable_offset

    async def _resolve_positions(self, tps: list[TopicPartition]) -> None:
        """Committed offset where there is one (for a group), else the reset policy.

        Each answer is applied only if the partition was not sought meanwhile (its epoch is
        unchanged): the fetcher and position() may resolve concurrently, and a seek between the
        question and the answer must win.
        """
        parts = self._subs.partitions
        asked = {tp: parts[tp].epoch for tp in tps if tp in parts and parts[tp].position is None}
        if not asked:
            return

        def still(tp: TopicPartition) -> bool:
            s = parts.get(tp)
            return s is not None and s.position is None and s.epoch == asked.get(tp)

        if self._group is not None:
            no_reset = [tp for tp in asked if parts[tp].reset is None]
            if no_reset:
                committed = await self._group.fetch_committed(no_reset, self.request_timeout)
                for tp, om in committed.items():
                    if om is not None and still(tp) and parts[tp].reset is None:
                        parts[tp].position = om.offset
        by_strategy: dict[str, list[TopicPartition]] = {}
        for tp in asked:
            if not still(tp):
                continue
            strategy = parts[tp].reset or self._subs.auto_offset_reset
            if strategy not in (EARLIEST, LATEST):
                raise KafkaClientError(f"no committed offset for {tp} and auto_offset_reset is 'none'")
            by_strategy.setdefault(strategy, []).append(tp)
        for strategy, stps in by_strategy.items():
            offsets = await self._fetcher.list_offsets(stps, EARLIEST_TIMESTAMP if strategy == EARLIEST
                                                       else LATEST_TIMESTAMP)
            for tp, off in offsets.items():
                if still(tp) and (parts[tp].reset or self._subs.auto_offset_reset) == strategy:
                    parts[tp].position, parts[tp].reset = off, None

    # ------------------------------------------------------------------ pause / resume
    def pause(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self._subs.state(tp).paused = True

    def resume(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self._subs.state(tp).paused = False
        self._fetcher.wake()

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self._subs.partitions.items() if s.paused}

    # ------------------------------------------------------------------ reading
    async def _poll_group(self) -> None:
        g = self._group
        if g is None or not self._subs.subscribed:
            return
        await g.poll(max(self.request_timeout, g.rebalance_timeout_ms / 1000))
        if self.enable_auto_commit and self._clock.monotonic() >= self._next_auto_commit:
            self._next_auto_commit = self._clock.monotonic() + self.auto_commit_interval
            with contextlib.suppress(KafkaClientError):
                await self.commit()

    async def getmany(self, *partitions: TopicPartition, timeout_ms: int = 0,
                      max_records: int = 10_000) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records that are ready, per partition; waits up to `timeout_ms` for the first ones."""
        only = set(partitions) if partitions else None
        return await self._wait_for(lambda: self._fetcher.take(max_records, only), timeout_ms)

    async def getmany_batches(self, *partitions: TopicPartition, timeout_ms: int = 0
                              ) -> dict[TopicPartition, FetchedBatches]:
        """What getmany() would hand out, per partition, as the record batches of one fetch, still
        encoded: for a reader that decodes columns at once (client/arrow.py) instead of a
        ConsumerRecord per record. Positions move past every record of the batches handed out;
        aborted transactions and markers are already left out at read_committed."""
        only = set(partitions) if partitions else None
        return await self._wait_for(lambda: self._fetcher.take_batches(only), timeout_ms)

    async def _wait_for(self, take: Callable[[], dict[TopicPartition, T]], timeout_ms: int) -> dict[TopicPartition, T]:
        self._check()
        deadline = self._clock.monotonic() + timeout_ms / 1000
        while True:
            await self._poll_group()
            if self._fetcher.errors:
                raise self._fetcher.errors.pop(0)
            out = take()
            if out:
                return out
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                return {}
            waiters = [asyncio.ensure_future(self._fetcher.data_ready.wait())]
            if self._group is not None:
                waiters.append(asyncio.ensure_future(self._group.rejoin_event.wait()))
            try:
                await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()
            if self._closed:
                raise ConsumerStoppedError("consumer closed")

    async def getone(self, timeout_ms: int | None = None) -> ConsumerRecord | None:
        """The next record; waits forever by default, returns None after `timeout_ms`."""
        if self._iter_index < len(self._iter_buffer):
            rec = self._iter_buffer[self._iter_index]
            self._iter_index += 1
            return rec
        deadline = None if timeout_ms is None else self._clock.monotonic() + timeout_ms / 1000
        while True:
            wait = 1000 if deadline is None else max(0, int((deadline - self._clock.monotonic()) * 1000))
            batches = await self.getmany(timeout_ms=wait)
            if batches:
                self._iter_buffer = [r for recs in batches.values() for r in recs]
                self._iter_index = 1
                return self._iter_buffer[0]
            if deadline is not None and self._clock.monotonic() >= deadline:
                return None

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        return self

    async def __anext__(self) -> ConsumerRecord:
        if self._closed:
            raise StopAsyncIteration
        try:
            rec = await self.getone()
        except ConsumerStoppedError:
            raise StopAsyncIteration from None
        assert rec is not None
        return rec

    # ------------------------------------------------------------------ committing
    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None) -> None:
        """Commit `offsets` (offset of the next record to read), or the current positions: after
        the last record handed out by getmany() or yielded by `async for`."""
        self._check()
        if self._group is None:
            raise IllegalStateError("commit() needs a group_id")
        if offsets is None:
            await self._commit_positions(self._subs.assigned)
            return
        oms = {tp: (o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o)) for tp, o in offsets.items()}
        await self._group.commit(oms, self.request_timeout)

    async def _commit_positions(self, tps: Iterable[TopicPartition]) -> None:
        assert self._group is not None
        unread: dict[TopicPartition, int] = {}
        for r in self._iter_buffer[self._iter_index:]:  # handed to the iterator's buffer, not yet yielded
            tp = TopicPartition(r.topic, r.partition)
            unread[tp] = min(unread.get(tp, r.offset), r.offset)
        oms = {}
        for tp in tps:
            s = self._subs.partitions.get(tp)
            if s is None or s.position is None:
                continue
            oms[tp] = OffsetAndMetadata(min(s.position, unread.get(tp, s.position)))
        await self._group.commit(oms, self.request_timeout)

    def _drop_iterated(self, tps: set[TopicPartition]) -> None:
        """Forget records of `tps` the iterator has buffered (after a seek or a revocation)."""
        rest = [r for r in self._iter_buffer[self._iter_index:] if (r.topic, r.partition) not in tps]
        self._iter_buffer, self._iter_index = rest, 0
