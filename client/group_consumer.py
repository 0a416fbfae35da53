"""Membership in a KIP-848 consumer group (`Consumer(group_protocol="consumer")`): the coordinator
assigns, the member heartbeats (ConsumerGroupHeartbeat) and reconciles.

A background task heartbeats at the interval the coordinator asks for, and at once when the poll
path has something to say (a revocation done, a new subscription). The poll path
(`Consumer.getmany` and iteration, as for classic groups) runs what the membership's decisions
(consumer_membership.py) say: revoke (the consumer commits with auto-commit, the listener is told),
then assign, then let the next heartbeat acknowledge; when fenced, tell the listener the
partitions are lost before joining again. So partitions change hands only between two calls of
the application, and a partition is never the application's while the coordinator may have given
it to another member.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    HeartbeatTopicPartitions,
)

from .cluster import Cluster
from .consumer_membership import (
    ConsumerMembership,
    HeartbeatFields,
    HeartbeatOutcome,
    Phase,
    TopicIdPartition,
)
from .errors import KafkaClientError, RetriableError, error_from_code
from .group_offsets import GroupOffsets
from .structs import ConsumerGroupMetadata, TopicPartition

E = ErrorCode
Hook = Callable[[set[TopicPartition]], Awaitable[None]]


async def _call(fn: Hook | None, arg: set[TopicPartition]) -> None:
    if fn is not None and arg:
        res: Any = fn(arg)
        if inspect.isawaitable(res):
            await res


class ConsumerGroupMember(GroupOffsets):
    OFFSET_VERSIONS = (9, 9)  # the versions with the member epoch: the coordinator wants nothing older
    REFUSED = frozenset({E.UNKNOWN_MEMBER_ID, E.FENCED_MEMBER_EPOCH, E.FENCED_INSTANCE_ID})
    # the epoch moved on between the commit's making and its arrival: sent again with the new one
    RETRY = frozenset({E.STALE_MEMBER_EPOCH})

    def __init__(self, cluster: Cluster, group_id: str, *, group_instance_id: str | None,
                 server_assignor: str | None, rebalance_timeout_ms: int, retry_backoff: float,
                 require_stable: bool) -> None:
        self._cluster = cluster
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.retry_backoff = retry_backoff
        self.require_stable = require_stable
        self.membership = ConsumerMembership(instance_id=group_instance_id, server_assignor=server_assignor,
                                             rebalance_timeout_ms=rebalance_timeout_ms)
        self.rejoin_event = asyncio.Event()  # the poll path has reconciling to do
        self._heartbeat_now = asyncio.Event()
        self._hb_task: asyncio.Task[None] | None = None
        self._leaving = False
        self._fatal: KafkaClientError | None = None
        self._names: dict[TopicIdPartition, TopicPartition] = {}  # of the partitions owned
        self.on_assigned: Hook | None = None
        self.on_revoked: Hook | None = None
        self.on_lost: Hook | None = None

    @property
    def member_id(self) -> str:
        return self.membership.member_id

    @property
    def generation_id(self) -> int:
        """The member epoch while in the group (what transactional offset commits carry), else -1."""
        return self.membership.epoch if self.membership.in_group else -1

    def metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, self.generation_id, self.member_id if self.membership.in_group
                                     else "", self.group_instance_id)

    def _identity(self) -> tuple[int, str]:
        return (self.membership.epoch, self.member_id) if self.membership.in_group else (-1, "")

    # ------------------------------------------------------------------ subscription
    def subscribe(self, topics: Iterable[str], pattern: str | None) -> None:
        self.membership.subscribe(topics, pattern)
        self._heartbeat_now.set()

    def unsubscribe(self) -> None:
        """The consumer dropped its partitions already; the next heartbeat leaves."""
        self.membership.unsubscribe()
        self._names = {}
        self._heartbeat_now.set()

    # ------------------------------------------------------------------ the poll path
    async def poll(self, timeout: float) -> None:
        """Start heartbeating; report a loss and rejoin; take the reconciliation's steps."""
        if self._fatal is not None:
            raise self._fatal
        if (self._hb_task is None or self._hb_task.done()) and not self._leaving:
            self._hb_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())
        self.rejoin_event.clear()
        m = self.membership
        if m.phase is Phase.FENCED:
            lost = {self._names[p] for p in m.lost if p in self._names}
            await _call(self.on_lost, lost)
            self._names = {}
            m.rejoin()
            self._heartbeat_now.set()
        while (step := m.next_step()) is not None:
            if step.revoke:
                await _call(self.on_revoked, {self._names[p] for p in step.revoke if p in self._names})
                m.revoked(step.revoke)
                for p in step.revoke:
                    self._names.pop(p, None)
            else:
                named = await self._name(step.assign)
                taken = m.assigned(named)
                if not taken:
                    break  # not in the metadata yet: the next poll tries again
                self._names.update((p, named[p]) for p in taken)
                await _call(self.on_assigned, {named[p] for p in taken})
            self._heartbeat_now.set()  # acknowledge (or report what is held) without waiting

    async def _name(self, tips: Iterable[TopicIdPartition]) -> dict[TopicIdPartition, TopicPartition]:
        """Topic ids -> names, refreshing the metadata (of every topic, for a regex) for unknown ids."""
        tips = list(tips)
        if any(self._cluster.topic_name(tid) is None for tid, _ in tips):
            with contextlib.suppress(KafkaClientError, OSError, TimeoutError):
                await self._cluster.refresh_metadata(all_topics=self.membership.regex is not None)
        out = {}
        for tid, index in tips:
            name = self._cluster.topic_name(tid)
            if name is not None:
                out[(tid, index)] = TopicPartition(name, index)
                self._cluster.wanted_topics.add(name)  # fetched from now on (a regex names no topic up front)
        return out

    # ------------------------------------------------------------------ heartbeats
    async def _heartbeat_loop(self) -> None:
        m = self.membership
        while not self._leaving:  # not only the cancellation: 3.11's wait_for may swallow it
            if not m.wants_heartbeat():
                self._heartbeat_now.clear()
                await self._heartbeat_now.wait()
                continue
            self._heartbeat_now.clear()  # before sending: a later set() makes the next one go at once
            try:
                outcome = await self._heartbeat()
            except (RetriableError, OSError, TimeoutError):
                outcome = HeartbeatOutcome.FIND_COORDINATOR
            except KafkaClientError as e:
                self._fatal = e
                self.rejoin_event.set()
                return
            if outcome is HeartbeatOutcome.FATAL:
                return
            if outcome is HeartbeatOutcome.FIND_COORDINATOR:
                self._cluster.forget_coordinator(self.group_id)
            if outcome is HeartbeatOutcome.FENCED and not m.lost:
                m.rejoin()  # nothing to report lost: join again at once
            elif outcome is HeartbeatOutcome.FENCED or m.next_step() is not None:
                self.rejoin_event.set()
            wait = m.heartbeat_interval_ms / 1000 if outcome is HeartbeatOutcome.OK else self.retry_backoff
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._heartbeat_now.wait(), wait)

    async def _heartbeat(self) -> HeartbeatOutcome:
        fields = self.membership.heartbeat()
        resp = await self._send(fields)
        assignment = None if resp.assignment is None else [
            (t.topic_id, p) for t in resp.assignment.topic_partitions for p in t.partitions]
        outcome = self.membership.on_response(resp.error_code, resp.member_epoch, resp.heartbeat_interval_ms,
                                              assignment, fields)
        if outcome is HeartbeatOutcome.FATAL:
            self._fatal = error_from_code(resp.error_code, resp.error_message or f"ConsumerGroupHeartbeat {self.group_id}")
            self.rejoin_event.set()
        return outcome

    async def _send(self, fields: HeartbeatFields, timeout: float | None = None) -> ConsumerGroupHeartbeatResponse:
        by_topic: dict[Any, list[int]] = defaultdict(list)
        for tid, index in fields.owned:
            by_topic[tid].append(index)
        node = await self._coordinator()
        conn = await self._cluster.connection(node)
        resp: ConsumerGroupHeartbeatResponse = await conn.request(ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=fields.member_epoch,
            instance_id=self.group_instance_id, rebalance_timeout_ms=fields.rebalance_timeout_ms,
            subscribed_topic_names=fields.subscribed_topic_names, subscribed_topic_regex=fields.subscribed_topic_regex,
            server_assignor=fields.server_assignor,
            topic_partitions=[HeartbeatTopicPartitions(topic_id=t, partitions=ps) for t, ps in by_topic.items()]),
            timeout=timeout)
        return resp

    # ------------------------------------------------------------------ leaving
    async def leave(self) -> None:
        """Stop heartbeating, give the partitions up (the listener is told they are revoked, as
        Kafka's consumer does on close), and leave: epoch -2 for a static member (its place and
        partitions wait for its return, until its session times out), -1 for a dynamic one (its
        partitions go to the others at once)."""
        self._leaving = True
        if self._hb_task is not None:
            self._hb_task.cancel()
            with contextlib.suppress(BaseException):
                await self._hb_task
        m = self.membership
        epoch = m.leave_epoch()
        try:
            if epoch is not None:
                await _call(self.on_revoked, {self._names[p] for p in m.owned if p in self._names})
        finally:
            if epoch is not None:
                with contextlib.suppress(KafkaClientError, OSError, TimeoutError):
                    await self._send(HeartbeatFields(epoch, -1, None, None, None, []), timeout=5.0)
            m.left()
            self._names = {}
