"""The follower's side of replication: fetch from each leader, append what it sends, as Kafka's
replica fetcher threads do — one fetch loop per leader broker, over its inter-broker listener.

Every fetch carries, per partition, the follower's log end, its last fetched epoch and the leader
epoch it follows. The leader answers with batches (appended with their offsets and epochs kept,
producer state and transaction index rebuilt by the log), its high watermark (ours becomes the
smaller of it and our log end), or the point where our log parts from its — we truncate there
and fetch again. A partition whose leader changes moves to that leader's loop; the leader's
answers about epochs (FENCED / UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER) wait for the metadata
image to bring the new leader.

Each loop keeps a fetch session (KIP-227) with its leader (follower_session.py): the first fetch
on a connection is full and opens it, later ones list only the partitions whose fetch state
changed and forget the ones no longer followed, and the leader answers only for the partitions
with news. A session error, a new connection or an answer thrown away starts over with a full
fetch.

Replicas under a replication throttle (throttle.py) share a byte-rate quota: while it is spent
they are left out of the fetches (forgotten from the session), and the loop waits when nothing
else is left to fetch.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Callable

import structlog

from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
    ReplicaState,
)
from protocol.topic_partition import TopicPartition

from ..partition import Partition
from ..partition.replica_state import Role
from ..throttle import ByteRateQuota
from ..wire import BrokerConnection, WireError, WireSecurity
from .follower_session import FetchPlan, FetchState, FollowerSession

log = structlog.get_logger()

FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 8 * 1024 * 1024
PARTITION_MAX_BYTES = 1024 * 1024
BACKOFF_S = 0.5
SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                  ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)


class ReplicaFetcher:
    def __init__(self, node_id: int, address_of: Callable[[int], tuple[str, int] | None],
                 topic_ids: Callable[[str], uuid.UUID], *, throttled: Callable[[Partition], bool] | None = None,
                 throttled_rate: int = -1, broker_epoch: Callable[[], int | None] = lambda: None,
                 clock: Clock = SYSTEM_CLOCK, security: WireSecurity | None = None) -> None:
        self._security = security  # the inter-broker listener's
        """`throttled` says which replicas share the `throttled_rate` quota (bytes/s; <= 0: none);
        `broker_epoch` is this broker's registration, stated in every fetch (KIP-903)."""
        self.node_id = node_id
        self._clock = clock
        self._broker_epoch = broker_epoch
        self._throttled = throttled
        self._quota = ByteRateQuota(throttled_rate, self._clock.monotonic()) if throttled and throttled_rate > 0 else None
        self.throttled_s = 0.0  # how long throttled replicas were held back, in all
        self._address_of = address_of
        self._topic_id = topic_ids
        self._following: dict[int, dict[TopicPartition, Partition]] = {}  # leader -> partitions
        self._loops: dict[int, asyncio.Task[None]] = {}
        self._wake: dict[int, asyncio.Event] = {}
        # Cancelling a loop is not enough to end it: on Python 3.11 asyncio.wait_for returns
        # what it waited for when that completes in the turn the cancellation comes, and the
        # cancellation is lost (a partition joining a loop as the broker stops wakes its wait).
        self._stopping = False
        self.fetched_bytes = 0
        self.fetches: Counter[str] = Counter()  # "full" / "incremental" -> sent

    def follow(self, part: Partition) -> None:
        """Fetch `part` from the leader its replica state names (from any other loop first)."""
        self.unfollow(part)
        leader = part.leader
        if leader < 0 or leader == self.node_id or self._stopping:
            return
        self._following.setdefault(leader, {})[part.tp] = part
        if leader not in self._loops or self._loops[leader].done():
            self._wake[leader] = asyncio.Event()
            self._loops[leader] = asyncio.get_running_loop().create_task(self._run(leader))
        else:
            self._wake[leader].set()

    def unfollow(self, part: Partition) -> None:
        for parts in self._following.values():
            parts.pop(part.tp, None)

    async def stop(self) -> None:
        self._stopping = True
        for t in self._loops.values():
            t.cancel()
        for t in self._loops.values():
            try:
                await t
            except (asyncio.CancelledError, Exception):  # noqa: S110 - stopping: its outcome is moot
                pass
        self._loops.clear()

    # ---- one loop per leader ---------------------------------------------------------------------
    async def _run(self, leader: int) -> None:
        conn: BrokerConnection | None = None
        session = FollowerSession()
        try:
            while not self._stopping:
                parts = [p for p in self._following.get(leader, {}).values()
                         if p.role == Role.FOLLOWER and p.leader == leader and not p.closed]
                if not parts:
                    self._following.pop(leader, None)
                    return
                parts, throttled, wait = self._hold_back(parts)
                if not parts:
                    self.throttled_s += wait
                    await self._pause(leader, wait)
                    continue
                try:
                    if conn is None or conn.closed:
                        address = self._address_of(leader)
                        if address is None:
                            raise WireError(f"no address for broker {leader}")
                        conn = await BrokerConnection.connect(*address, client_id=f"ketch-replica-{self.node_id}",
                                                              timeout=2.0, security=self._security)
                        session.reset(new_connection=True)
                    by_key = {p.tp: p for p in parts}
                    plan = session.plan({k: self._fetch_state(p, k in throttled) for k, p in by_key.items()})
                    request = self._request(plan, conn)
                    self.fetches["full" if plan.full else "incremental"] += 1
                    resp = await conn.request(request, timeout=10.0 + FETCH_MAX_WAIT_MS / 1000)
                    assert isinstance(resp, FetchResponse)
                    session.on_response(plan, resp.error_code, resp.session_id)
                    if resp.error_code:
                        # a session error: the next fetch is full, at once; anything else: wait
                        log.info("replica fetch refused", leader=leader, error=ErrorCode(resp.error_code).name)
                        backoff = resp.error_code not in SESSION_ERRORS
                    else:
                        # what changed while the request was out (a new leader or epoch, a
                        # truncation) makes its answer for that partition stale: drop it and ask
                        # again — in full, since what the leader thinks it told us is in doubt
                        asked = plan.wanted  # each partition's leader epoch and log end as the fetch went out
                        fresh = {k: p for k, p in by_key.items() if p.leader == leader
                                 and (p.leader_epoch, p.log_end_offset) == (asked[k].current_leader_epoch,
                                                                            asked[k].fetch_offset)}
                        if len(fresh) < len(by_key):
                            session.reset(new_connection=False)
                        backoff, throttled_bytes = self._apply(resp, fresh, throttled)
                        if self._quota is not None and throttled_bytes:
                            self._quota.record(throttled_bytes, self._clock.monotonic())
                except (WireError, OSError) as e:
                    log.debug("replica fetch failed", leader=leader, error=str(e))
                    if conn is not None:
                        conn.close()
                    conn = None
                    backoff = True
                if backoff:
                    await self._pause(leader, BACKOFF_S)
        finally:
            if conn is not None:
                conn.close()

    async def _pause(self, leader: int, seconds: float) -> None:
        """Wait `seconds`, or less if a partition joins this leader's loop."""
        wake = self._wake[leader]
        wake.clear()
        try:
            async with asyncio.timeout(seconds):  # 3.11's wait_for would make a task of each wait
                await wake.wait()
        except TimeoutError:
            pass

    def _hold_back(self, parts: list[Partition]) -> tuple[list[Partition], set[TopicPartition], float]:
        """The partitions to fetch now, which of them count against the quota, and — when the
        quota is spent — how long the throttled ones must wait."""
        if self._quota is None or self._throttled is None:
            return parts, set(), 0.0
        throttled = {p.tp for p in parts if self._throttled(p)}
        now = self._clock.monotonic()
        if not throttled or self._quota.available(now):
            return parts, throttled, 0.0
        return [p for p in parts if p.tp not in throttled], set(), self._quota.wait_s(now)

    def _fetch_state(self, p: Partition, throttled: bool) -> FetchState:
        return FetchState(topic_id=self._topic_id(p.topic), fetch_offset=p.log_end_offset, current_leader_epoch=p.leader_epoch,
                          last_fetched_epoch=p.latest_epoch, log_start_offset=p.log_start_offset,
                          max_bytes=self._max_bytes(throttled))

    def _request(self, plan: FetchPlan, conn: BrokerConnection) -> FetchRequest:
        version = conn.version_for(FetchRequest)
        if version < 12:
            raise WireError(f"the leader speaks Fetch up to v{version}; replication needs v12+")
        by_topic: dict[tuple[str, uuid.UUID], list[FetchPartition]] = {}
        for (topic, index), st in plan.send.items():
            by_topic.setdefault((topic, st.topic_id), []).append(FetchPartition(
                partition=index, current_leader_epoch=st.current_leader_epoch, fetch_offset=st.fetch_offset,
                last_fetched_epoch=st.last_fetched_epoch, log_start_offset=st.log_start_offset,
                partition_max_bytes=st.max_bytes))
        forget: dict[tuple[str, uuid.UUID], list[int]] = {}
        for (topic, index), topic_id in plan.forget:
            forget.setdefault((topic, topic_id), []).append(index)
        return FetchRequest(
            replica_id=self.node_id,
            replica_state=ReplicaState(replica_id=self.node_id, replica_epoch=_or_unknown(self._broker_epoch())),
            max_wait_ms=FETCH_MAX_WAIT_MS, min_bytes=1, max_bytes=FETCH_MAX_BYTES,
            session_id=plan.session_id, session_epoch=plan.epoch,
            topics=[FetchTopic(topic=t, topic_id=i, partitions=ps) for (t, i), ps in by_topic.items()],
            forgotten_topics_data=[ForgottenTopic(topic=t, topic_id=i, partitions=ps) for (t, i), ps in forget.items()])

    def _max_bytes(self, throttled: bool) -> int:
        """A throttled replica asks for at most a second's worth at a time."""
        if throttled and self._quota is not None:
            return max(1024, min(PARTITION_MAX_BYTES, self._quota.rate))
        return PARTITION_MAX_BYTES

    def _apply(self, resp: FetchResponse, by_key: dict[TopicPartition, Partition],
               throttled: set[TopicPartition]) -> tuple[bool, int]:
        """Append what came; True to back off before the next fetch, and the bytes that came
        for throttled replicas. Only errors mean backing off: the leader answers them without
        waiting, so fetching again at once would spin. An answer with nothing new has already
        waited out the leader's long poll (and with a session lists nothing at all): fetching
        again at once keeps a fetch parked at the leader, so the next append there reaches this
        follower — and the acks=all produce waiting for it completes — without waiting out a
        pause."""
        moved = False
        failed = False
        throttled_bytes = 0
        by_id = {self._topic_id(p.topic): p.topic for p in by_key.values()}
        for t in resp.responses:
            name = by_id.get(t.topic_id, t.topic)
            for pd in t.partitions:
                part = by_key.get(TopicPartition(name, pd.partition_index))
                if part is None or part.closed or part.role != Role.FOLLOWER:
                    continue
                try:
                    if pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and pd.log_start_offset > part.log_end_offset:
                        part.restart_at(pd.log_start_offset)
                        moved = True
                    elif pd.error_code:
                        failed = True  # a leadership change the image will bring: wait for it
                    elif pd.diverging_epoch.epoch >= 0:
                        part.truncate_to_divergence(pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset)
                        moved = True
                    else:
                        records = pd.records or b""
                        self.fetched_bytes += len(records)
                        if (name, pd.partition_index) in throttled:
                            throttled_bytes += len(records)
                        part.append_replicated(records, pd.high_watermark, pd.log_start_offset)
                        moved = moved or bool(records)
                except KafkaError as e:
                    failed = True
                    log.warning("replicated append failed", topic=part.topic, partition=part.index, error=e.code.name,
                                message=e.message)
        return failed and not moved, throttled_bytes


def _or_unknown(epoch: int | None) -> int:
    return -1 if epoch is None else epoch
