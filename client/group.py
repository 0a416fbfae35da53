"""Consumer group membership (the classic protocol): join, sync, heartbeat, leave; offset commit/fetch.

Rebalances run from the consumer's poll path (`ensure_active`), as in Kafka clients, so partitions
change hands only between two calls of the application, never under its feet; the heartbeat task
only notices that a rebalance is needed and wakes the poll.

Eager vs cooperative: the rebalance protocol is cooperative only if every configured assignor is
(Java does the same). Eager members give up all partitions before joining; cooperative members
keep them, join with their owned partitions, revoke only what the new assignment takes away, and
rejoin at once if they revoked anything so that the partitions can be handed to their new owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from protocol.errors import ErrorCode
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse
from protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment, SyncGroupResponse

from .assignors import (
    Assignment,
    CooperativeStickyAssignor,
    RangeAssignor,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from .cluster import Cluster
from .errors import (
    IllegalStateError,
    KafkaClientError,
    KafkaTimeoutError,
    RetriableError,
    error_from_code,
)
from .group_offsets import COORDINATOR_GONE as _COORDINATOR_GONE
from .group_offsets import GroupOffsets
from .structs import ConsumerGroupMetadata, TopicPartition

E = ErrorCode


class RebalanceListener(Protocol):
    """Called from the consumer's poll during a rebalance; may be sync or async functions.

    on_partitions_revoked: before partitions are taken away (commit your work here).
    on_partitions_assigned: after new partitions are given (seek here if you keep offsets elsewhere).
    on_partitions_lost: the member was dropped from the group; the partitions are already someone
    else's, so do not commit for them.
    """

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Awaitable[None] | None: ...

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Awaitable[None] | None: ...


async def _call(fn: Callable[..., Any] | None, arg: set[TopicPartition]) -> None:
    if fn is None:
        return
    res = fn(arg)
    if inspect.isawaitable(res):
        await res


class GroupMember(GroupOffsets):
    REFUSED = frozenset({E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID})

    def __init__(self, cluster: Cluster, group_id: str, *, assignors: list[RangeAssignor | CooperativeStickyAssignor],
                 session_timeout_ms: int, rebalance_timeout_ms: int, heartbeat_interval_ms: int,
                 group_instance_id: str | None, retry_backoff: float, require_stable: bool) -> None:
        self._cluster = cluster
        self.group_id = group_id
        self.assignors = assignors
        self.cooperative = all(a.cooperative for a in assignors)
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.group_instance_id = group_instance_id
        self.retry_backoff = retry_backoff
        self.require_stable = require_stable
        self.member_id = ""
        self.generation_id = -1
        self.protocol: str | None = None
        self.leader_id: str | None = None
        self.owned: set[TopicPartition] = set()
        self.topics: tuple[str, ...] = ()
        self.need_rejoin = True
        self.rejoin_event = asyncio.Event()
        self._hb_task: asyncio.Task[None] | None = None
        self.listener: Any = None
        # hooks the consumer provides
        self.on_assigned: Callable[[set[TopicPartition]], Awaitable[None]] | None = None
        self.on_revoked: Callable[[set[TopicPartition]], Awaitable[None]] | None = None
        self.on_lost: Callable[[set[TopicPartition]], Awaitable[None]] | None = None

    def metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, self.generation_id, self.member_id, self.group_instance_id)

    def _identity(self) -> tuple[int, str]:
        return self.generation_id, self.member_id

    def _refused(self) -> None:
        self.need_rejoin = True
        self.rejoin_event.set()

    # ------------------------------------------------------------------ subscription
    def subscribe(self, topics: Iterable[str], pattern: str | None) -> None:
        if pattern is not None:
            raise IllegalStateError("a subscription pattern needs group_protocol='consumer' (KIP-848)")
        topics = tuple(sorted(set(topics)))
        if topics != self.topics:
            self.topics = topics
            self.need_rejoin = True

    def unsubscribe(self) -> None:
        self.topics = ()
        self.owned = set()
        self.need_rejoin = True

    async def poll(self, timeout: float) -> None:
        """From the consumer's poll path: report an expulsion, rebalance if needed."""
        if not self.topics:
            return
        await self.handle_stale()
        if self.need_rejoin:
            await self.ensure_active(self.topics, timeout)

    # ------------------------------------------------------------------ rebalancing
    async def ensure_active(self, topics: tuple[str, ...], timeout: float) -> None:
        """Join (or rejoin) the group if needed; returns once we hold a current assignment."""
        deadline = self._cluster.clock.monotonic() + timeout
        while self.need_rejoin:
            if self._cluster.clock.monotonic() > deadline:
                raise KafkaTimeoutError(f"could not join group {self.group_id} within {timeout}s")
            try:
                await self._rebalance(topics)
            except (RetriableError, OSError, TimeoutError):
                self._coordinator_gone()
                await asyncio.sleep(self.retry_backoff)
        if self._hb_task is None or self._hb_task.done():
            self._hb_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def _rebalance(self, topics: tuple[str, ...]) -> None:
        if not self.cooperative and self.owned:
            revoked, self.owned = self.owned, set()
            await _call(self.on_revoked, revoked)
        node = await self._coordinator()
        sub = Subscription(topics, tuple(sorted(self.owned)) if self.cooperative else (), self.generation_id)
        req = JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
            group_instance_id=self.group_instance_id, protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name=a.name, metadata=encode_subscription(sub)) for a in self.assignors])
        conn = await self._cluster.connection(node)
        resp: JoinGroupResponse = await conn.request(
            req, timeout=self._cluster.request_timeout + self.rebalance_timeout_ms / 1000)
        code = resp.error_code
        if code == E.MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id  # KIP-394: join again with the id the coordinator chose
            return
        if code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.FENCED_INSTANCE_ID):
            await self._lose()
            return
        if code == E.GROUP_MAX_SIZE_REACHED:
            # the coordinator dropped whatever place we had; a later poll starts afresh, but
            # retrying here would only be refused again, so the application is told (as in Java)
            await self._lose()
            raise error_from_code(code, f"JoinGroup {self.group_id}")
        if code in _COORDINATOR_GONE:
            self._coordinator_gone()
            return
        if code in (E.COORDINATOR_LOAD_IN_PROGRESS, E.REBALANCE_IN_PROGRESS):
            await asyncio.sleep(self.retry_backoff)
            return
        if code:
            raise error_from_code(code, f"JoinGroup {self.group_id}")
        self.member_id = resp.member_id
        self.generation_id = resp.generation_id
        self.protocol = resp.protocol_name
        self.leader_id = resp.leader
        assignments: list[SyncGroupRequestAssignment] = []
        if resp.leader == resp.member_id and not resp.skip_assignment:
            assignments = await self._assign(resp)
        sreq = SyncGroupRequest(group_id=self.group_id, generation_id=self.generation_id, member_id=self.member_id,
                                group_instance_id=self.group_instance_id, protocol_type="consumer",
                                protocol_name=self.protocol, assignments=assignments)
        sresp: SyncGroupResponse = await conn.request(
            sreq, timeout=self._cluster.request_timeout + self.rebalance_timeout_ms / 1000)
        code = sresp.error_code
        if code == E.REBALANCE_IN_PROGRESS:
            return
        if code == E.COORDINATOR_LOAD_IN_PROGRESS:
            # the same coordinator, still loading the group: join again after a backoff (a sync is
            # only valid for the generation it belongs to, so it is not resent on its own)
            await asyncio.sleep(self.retry_backoff)
            return
        if code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.FENCED_INSTANCE_ID):
            await self._lose()
            return
        if code in _COORDINATOR_GONE:
            self._coordinator_gone()
            return
        if code:
            raise error_from_code(code, f"SyncGroup {self.group_id}")
        new = set(decode_assignment(sresp.assignment).partitions)
        self.need_rejoin = False
        self.rejoin_event.clear()
        if self.cooperative:
            revoked = self.owned - new
            added = new - self.owned
            if revoked:
                self.owned -= revoked
                await _call(self.on_revoked, revoked)
                self.need_rejoin = True  # let the revoked partitions go to their new owner now
            self.owned |= added
            await _call(self.on_assigned, added)
        else:
            self.owned = new
            await _call(self.on_assigned, new)

    async def _assign(self, resp: JoinGroupResponse) -> list[SyncGroupRequestAssignment]:
        assignor = next((a for a in self.assignors if a.name == resp.protocol_name), None)
        if assignor is None:
            raise KafkaClientError(f"coordinator chose protocol {resp.protocol_name!r} that we did not offer")
        members = {m.member_id: decode_subscription(m.metadata) for m in resp.members}
        topics = sorted({t for s in members.values() for t in s.topics})
        await self._cluster.refresh_metadata(topics)
        counts = {t: n for t in topics if (n := self._cluster.partitions_for(t)) is not None}
        result = assignor.assign(counts, members)
        return [SyncGroupRequestAssignment(member_id=m, assignment=encode_assignment(Assignment(tuple(tps))))
                for m, tps in result.items()]

    async def _lose(self) -> None:
        lost, self.owned = self.owned, set()
        self.member_id = ""
        self.generation_id = -1
        self.need_rejoin = True
        if lost:
            await _call(self.on_lost, lost)

    # ------------------------------------------------------------------ heartbeats
    async def _heartbeat_loop(self) -> None:
        while not self._leaving:
            await asyncio.sleep(self.heartbeat_interval)
            if self.need_rejoin or self.generation_id < 0:
                continue
            try:
                node = await self._coordinator()
                resp = await self._cluster.request(node, HeartbeatRequest(
                    group_id=self.group_id, generation_id=self.generation_id, member_id=self.member_id,
                    group_instance_id=self.group_instance_id))
                code = resp.error_code
            except (RetriableError, OSError, TimeoutError):
                self._coordinator_gone()
                continue
            except KafkaClientError:
                continue
            if code == 0:
                continue
            if code in _COORDINATOR_GONE:
                self._coordinator_gone()
            elif code in (E.REBALANCE_IN_PROGRESS, E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.FENCED_INSTANCE_ID):
                if code != E.REBALANCE_IN_PROGRESS:
                    self.generation_id = -1  # the poll path sees it and reports the loss
                    self._stale = True
                self.need_rejoin = True
                self.rejoin_event.set()

    _stale = False
    _leaving = False

    async def handle_stale(self) -> None:
        """If the heartbeat found us expelled, tell the listener the partitions are lost."""
        if self._stale:
            self._stale = False
            await self._lose()

    # ------------------------------------------------------------------ leaving
    async def leave(self) -> None:
        self._leaving = True
        if self._hb_task is not None:
            self._hb_task.cancel()
            with contextlib.suppress(BaseException):
                await self._hb_task
        if self.generation_id < 0 or not self.member_id or self.group_instance_id is not None:
            return  # static members stay in the group across restarts (KIP-345)
        with contextlib.suppress(KafkaClientError, OSError, TimeoutError):
            node = await self._coordinator()
            conn = await self._cluster.connection(node)
            v = conn.version_for(LeaveGroupRequest)
            if v >= 3:
                req = LeaveGroupRequest(group_id=self.group_id, members=[MemberIdentity(member_id=self.member_id)])
            else:
                req = LeaveGroupRequest(group_id=self.group_id, member_id=self.member_id)
            await conn.request(req, version=v, timeout=5.0)
        self.generation_id = -1
        self.member_id = ""
