"""The share consumer (KIP-932): members of a share group read the same partitions, each record
going to one member at a time, and say per record what became of it.

    async with ShareConsumer("localhost:9092", "workers", acknowledgement_mode="explicit") as c:
        c.subscribe(["jobs"])
        while True:
            for record in await c.poll(timeout_ms=1000):
                c.acknowledge(record, AcknowledgeType.ACCEPT if work(record) else AcknowledgeType.RELEASE)
            await c.commit()  # or let the next poll carry the acknowledgements

Membership is ShareGroupHeartbeat to the group coordinator (a background task: the broker assigns
the partitions, nothing to reconcile); records come with ShareFetch from each assigned partition's
leader, in a share session per broker; acknowledgements ride on the next ShareFetch to that broker,
or go at once with ShareAcknowledge on `commit()`. In implicit mode (the default, as in Kafka)
every record handed out is ACCEPTed by the next poll, commit or close. `close()` sends what is
owed, closes the share sessions (what the member still holds goes back to the others) and leaves
the group. The decisions are in share_state.py; this is the I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from types import TracebackType

from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.errors import ErrorCode
from protocol.messages.share_fetch import (
    AcknowledgementBatch,
    ForgottenTopic,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchPartition,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareFetchTopic,
)
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse

from .cluster import COORDINATOR_GROUP, Cluster
from .errors import (
    ConnectionLostError,
    ConsumerStoppedError,
    IllegalStateError,
    KafkaClientError,
    RetriableError,
    error_from_code,
)
from .isolation import select_batches
from .security import Security
from .share_state import (
    FINAL_EPOCH,
    LEAVE_EPOCH,
    AckBatch,
    Acknowledgements,
    AcknowledgeType,
    HeartbeatOutcome,
    ShareMembership,
    ShareSession,
    TopicIdPartition,
    acquired_offsets,
    session_error,
)
from .structs import ShareRecord, TopicPartition

AckCallback = Callable[[TopicPartition, dict[int, AcknowledgeType], "KafkaClientError | None"], None]


def _sessionless(what: str) -> KafkaClientError:
    """The error of acknowledgements no share session can carry: the records they name come back
    when their locks run out (a session that ends releases them at once)."""
    return KafkaClientError(f"no share session to carry the acknowledgements: {what}", ErrorCode.SHARE_SESSION_NOT_FOUND)


class ShareConsumer:
    """An asyncio share-group consumer. Use as `async with`, or call `start()` and `close()`.

    `on_acknowledged(tp, {offset: type}, error)` is called for every acknowledgement sent, once
    the broker answered it (error None: applied and durable) or it failed (the records come back
    when their acquisition lock runs out).
    """

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        group_id: str,
        *,
        client_id: str = "ketch-share-consumer",
        acknowledgement_mode: str = "implicit",
        max_poll_records: int = 500,
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 52_428_800,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        rack_id: str | None = None,
        on_acknowledged: AckCallback | None = None,
        clock: Clock = SYSTEM_CLOCK,
        security: Security | None = None,
    ) -> None:
        if acknowledgement_mode not in ("implicit", "explicit"):
            raise ValueError(f"acknowledgement_mode must be implicit or explicit, not {acknowledgement_mode!r}")
        if not group_id:
            raise ValueError("a share consumer needs a group_id")
        self.group_id = group_id
        self.explicit = acknowledgement_mode == "explicit"
        self.max_poll_records = max_poll_records
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.request_timeout = request_timeout_ms / 1000
        self.retry_backoff = retry_backoff_ms / 1000
        self.rack_id = rack_id
        self.on_acknowledged = on_acknowledged
        self._cluster = Cluster(bootstrap_servers, client_id=client_id, request_timeout=self.request_timeout,
                                retry_backoff=self.retry_backoff, allow_auto_topic_creation=False, clock=clock,
                                security=security)
        self._clock = clock
        self._member = ShareMembership()
        self._acks = Acknowledgements()
        self._sessions: dict[int, ShareSession] = {}
        self._node_locks: dict[int, asyncio.Lock] = defaultdict(asyncio.Lock)  # one request per session at a time
        self._assignment_changed = asyncio.Event()
        self._heartbeat_now = asyncio.Event()
        self._hb_task: asyncio.Task[None] | None = None
        self._pending_round: asyncio.Task[dict[TopicPartition, list[ShareRecord]]] | None = None
        self._fatal: KafkaClientError | None = None
        self._started = False
        self._closed = False

    @property
    def member_id(self) -> str:
        return self._member.member_id

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self._started:
            return
        await self._cluster.refresh_metadata()
        self._started = True
        self._hb_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def __aenter__(self) -> ShareConsumer:
        await self.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Acknowledge what is owed, close the share sessions (what this member still holds goes to
        the others at once), leave the group (heartbeat epoch -1), close the connections."""
        if self._closed:
            return
        self._closed = True
        self._assignment_changed.set()
        if self._started:
            if self._hb_task is not None:
                self._hb_task.cancel()
                with contextlib.suppress(BaseException):
                    await self._hb_task
            if self._pending_round is not None:  # a cancelled poll's round: its records were never handed out
                with contextlib.suppress(BaseException):
                    await self._pending_round
            if not self.explicit:
                self._acks.accept_delivered()
            await asyncio.gather(*(self._acknowledge(node, final=True) for node, s in list(self._sessions.items())
                                   if s.open), return_exceptions=True)
            self._fail_acks(self._acks.take(list(self._acks.pending)), _sessionless("consumer closed"))
            if self._member.epoch > 0:
                with contextlib.suppress(KafkaClientError, OSError, TimeoutError):
                    await self._send_heartbeat(LEAVE_EPOCH, None)
        await self._cluster.close()

    def _check(self) -> None:
        if self._closed:
            raise ConsumerStoppedError("consumer is closed")
        if not self._started:
            raise IllegalStateError("consumer not started: use `async with ShareConsumer(...)` or await start()")
        if self._fatal is not None:
            raise self._fatal

    # ------------------------------------------------------------------ membership
    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the share group for `topics` (the broker assigns their partitions)."""
        self._member.subscribe(topics)
        self._cluster.wanted_topics |= set(self._member.subscription)
        self._heartbeat_now.set()

    def unsubscribe(self) -> None:
        self._member.subscribe(())
        self._heartbeat_now.set()

    def subscription(self) -> tuple[str, ...]:
        return self._member.subscription

    def assignment(self) -> set[TopicPartition]:
        """The partitions the share group gives this member (others may share them)."""
        return set(self._named(self._member.assignment).values())

    def _named(self, tips: Iterable[TopicIdPartition]) -> dict[TopicIdPartition, TopicPartition]:
        out = {}
        for tid, index in tips:
            name = self._cluster.topic_name(tid)
            if name is not None:
                out[(tid, index)] = TopicPartition(name, index)
        return out

    async def _heartbeat_loop(self) -> None:
        while not self._closed:
            if not self._member.subscription and self._member.epoch == 0:
                self._heartbeat_now.clear()
                await self._heartbeat_now.wait()
                continue
            try:
                outcome = await self._heartbeat()
            except (RetriableError, OSError, TimeoutError):
                outcome = HeartbeatOutcome.FIND_COORDINATOR
            except KafkaClientError as e:
                self._fatal = e
                self._assignment_changed.set()
                return
            if outcome is HeartbeatOutcome.FATAL:
                return
            if outcome is HeartbeatOutcome.FIND_COORDINATOR:
                self._cluster.forget_coordinator(self.group_id, COORDINATOR_GROUP)
            if outcome is HeartbeatOutcome.REJOIN:
                continue
            wait = self._member.heartbeat_interval_ms / 1000 if outcome is HeartbeatOutcome.OK else self.retry_backoff
            self._heartbeat_now.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._heartbeat_now.wait(), wait)

    async def _heartbeat(self) -> HeartbeatOutcome:
        epoch, topics = self._member.request_fields()
        if not self._member.subscription:  # unsubscribed: leave (a later subscribe joins again)
            await self._send_heartbeat(LEAVE_EPOCH, None)
            self._member.fenced()
            self._set_assignment(frozenset())
            return HeartbeatOutcome.OK
        resp = await self._send_heartbeat(epoch, topics)
        assignment = None if resp.assignment is None else [
            (t.topic_id, p) for t in resp.assignment.topic_partitions for p in t.partitions]
        before = self._member.assignment
        outcome = self._member.on_response(resp.error_code, resp.member_epoch, resp.heartbeat_interval_ms,
                                           assignment, topics)
        if outcome is HeartbeatOutcome.FATAL:
            self._fatal = error_from_code(resp.error_code, resp.error_message or "ShareGroupHeartbeat")
            self._assignment_changed.set()
        if self._member.assignment != before:
            if any(self._cluster.topic_name(tid) is None for tid, _ in self._member.assignment):
                await self._cluster.refresh_metadata()
            self._set_assignment(self._member.assignment)
        return outcome

    def _set_assignment(self, assignment: frozenset[TopicIdPartition]) -> None:
        self._member.assignment = assignment
        self._assignment_changed.set()

    async def _send_heartbeat(self, epoch: int, topics: list[str] | None) -> ShareGroupHeartbeatResponse:
        node = await self._cluster.coordinator(self.group_id, COORDINATOR_GROUP, timeout=self.request_timeout)
        conn = await self._cluster.connection(node)
        resp: ShareGroupHeartbeatResponse = await conn.request(ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self._member.member_id, member_epoch=epoch, rack_id=self.rack_id,
            subscribed_topic_names=topics))
        return resp

    # ------------------------------------------------------------------ reading
    async def poll(self, timeout_ms: int = 0) -> list[ShareRecord]:
        """The next records acquired for this member (each with its delivery count), waiting up
        to `timeout_ms` for some. In implicit mode, what the last poll handed out is ACCEPTed."""
        return [r for recs in (await self.getmany(timeout_ms=timeout_ms)).values() for r in recs]

    async def getmany(self, timeout_ms: int = 0) -> dict[TopicPartition, list[ShareRecord]]:
        """poll(), per partition."""
        self._check()
        if not self.explicit:
            self._acks.accept_delivered()
        deadline = self._clock.monotonic() + timeout_ms / 1000
        while True:
            remaining = deadline - self._clock.monotonic()
            out = await self._round(int(max(0.0, min(remaining, self.fetch_max_wait_ms / 1000)) * 1000))
            self._check()
            if out or deadline - self._clock.monotonic() <= 0:
                for tp, recs in out.items():
                    self._acks.handed_out(tp, (r.offset for r in recs))
                return out

    async def _round(self, wait_ms: int) -> dict[TopicPartition, list[ShareRecord]]:
        """A fetch round that a cancelled poll does not cut short: its requests carry acknowledgements
        and acquire records, so it runs to its end and the next poll (or close) takes its result."""
        task = self._pending_round
        if task is None:
            task = self._pending_round = asyncio.get_running_loop().create_task(self._fetch_round(wait_ms))
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._pending_round = None

    async def _fetch_round(self, wait_ms: int) -> dict[TopicPartition, list[ShareRecord]]:
        """One ShareFetch to each broker that leads an assigned partition or is owed acknowledgements."""
        named = self._named(self._member.assignment)
        by_node: dict[int, list[TopicIdPartition]] = defaultdict(list)
        unknown = len(named) < len(self._member.assignment)
        for tip, tp in named.items():
            leader = self._cluster.leader_for(tp)
            if leader is None:
                unknown = True
            else:
                by_node[leader].append(tip)
        for tp in list(self._acks.pending):
            leader = self._cluster.leader_for(tp)
            if leader is None:
                unknown = True
            elif leader not in by_node:
                if self._sessions.get(leader, ShareSession()).open:
                    by_node[leader] = []
                else:  # no session there and none coming: nothing can carry them
                    self._fail_acks(self._acks.take([tp]), _sessionless(f"broker {leader}"))
        if unknown:
            with contextlib.suppress(KafkaClientError, OSError, TimeoutError):
                await self._cluster.refresh_metadata()
        if not by_node:
            self._assignment_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._assignment_changed.wait(), max(wait_ms / 1000, 0.001))
            return {}
        results = await asyncio.gather(*(self._exchange(node, parts, wait_ms) for node, parts in by_node.items()))
        out: dict[TopicPartition, list[ShareRecord]] = {}
        for r in results:
            out.update(r or {})
        if not out and any(r is None for r in results):
            await asyncio.sleep(self.retry_backoff)
        return out

    def _tp(self, tid: uuid.UUID, index: int) -> TopicPartition | None:
        name = self._cluster.topic_name(tid)
        return None if name is None else TopicPartition(name, index)

    def _tip(self, tp: TopicPartition) -> TopicIdPartition | None:
        t = self._cluster.topics.get(tp.topic)
        return None if t is None or t.topic_id is None else (t.topic_id, tp.partition)

    def _acks_for(self, node: int) -> dict[TopicPartition, list[AckBatch]]:
        return self._acks.take([tp for tp in list(self._acks.pending) if self._cluster.leader_for(tp) == node
                                and self._tip(tp) is not None])

    async def _exchange(self, node: int, parts: list[TopicIdPartition],
                        wait_ms: int) -> dict[TopicPartition, list[ShareRecord]] | None:
        """A ShareFetch in this broker's session carrying what is owed to it (None: it failed)."""
        async with self._node_locks[node]:
            s = self._sessions.setdefault(node, ShareSession())
            if not parts:
                return {} if await self._acknowledge_locked(node, s, final=False) else None
            epoch, listed, forgotten = s.plan(parts)
            acks = self._acks_for(node) if s.open else {}  # none at epoch 0
            topics: dict[uuid.UUID, dict[int, list[AcknowledgementBatch]]] = defaultdict(dict)
            for tid, index in listed:
                topics[tid][index] = []
            for tp, batches in acks.items():
                tip = self._tip(tp)
                assert tip is not None
                topics[tip[0]][tip[1]] = _wire(batches)
            forgot: dict[uuid.UUID, list[int]] = defaultdict(list)
            for tid, index in forgotten:
                forgot[tid].append(index)
            req = ShareFetchRequest(
                group_id=self.group_id, member_id=self._member.member_id, share_session_epoch=epoch,
                max_wait_ms=wait_ms, min_bytes=self.fetch_min_bytes, max_bytes=self.fetch_max_bytes,
                max_records=self.max_poll_records, batch_size=self.max_poll_records,
                topics=[ShareFetchTopic(topic_id=tid, partitions=[
                    ShareFetchPartition(partition_index=i, acknowledgement_batches=b) for i, b in ps.items()])
                    for tid, ps in topics.items()],
                forgotten_topics_data=[ForgottenTopic(topic_id=tid, partitions=ps) for tid, ps in forgot.items()])
            try:
                conn = await self._cluster.connection(node)
                resp: ShareFetchResponse = await conn.request(req, timeout=self.request_timeout + wait_ms / 1000)
            except (RetriableError, OSError, TimeoutError) as e:
                s.lost()
                self._fail_acks(acks, ConnectionLostError(f"ShareFetch to broker {node}: {e}"))
                with contextlib.suppress(KafkaClientError, OSError, TimeoutError):
                    await self._cluster.refresh_metadata()
                return None
            s.answered(resp.error_code, listed, forgotten)
            if resp.error_code:
                err = error_from_code(resp.error_code, resp.error_message or "ShareFetch")
                self._fail_acks(acks, err)
                if not session_error(resp.error_code) and not isinstance(err, RetriableError):
                    self._fatal = err
                return None
            return await self._take_response(resp, acks)

    async def _take_response(self, resp: ShareFetchResponse,
                             acks: dict[TopicPartition, list[AckBatch]]) -> dict[TopicPartition, list[ShareRecord]]:
        out: dict[TopicPartition, list[ShareRecord]] = {}
        refresh = False
        answered: set[TopicPartition] = set()
        for t in resp.responses:
            for p in t.partitions:
                tp = self._tp(t.topic_id, p.partition_index)
                if tp is None:
                    refresh = True
                    continue
                if tp in acks:
                    answered.add(tp)
                    self._acked(tp, acks[tp], p.acknowledge_error_code)
                if p.error_code:
                    err = error_from_code(p.error_code, f"ShareFetch {tp}")
                    if isinstance(err, RetriableError) or p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                        refresh = True
                    else:
                        self._fatal = err
                    continue
                counts = acquired_offsets((a.first_offset, a.last_offset, a.delivery_count)
                                          for a in p.acquired_records)
                if not counts:
                    continue
                fetched, _ = select_batches(tp, p.records, min(counts), None, read_committed=False)
                recs = [ShareRecord(*r, counts[r.offset])
                        for r in (fetched.records() if fetched is not None else []) if r.offset in counts]
                self._acks.gaps(tp, set(counts) - {r.offset for r in recs})
                if recs:
                    out.setdefault(tp, []).extend(recs)
        self._fail_acks({tp: b for tp, b in acks.items() if tp not in answered},
                        KafkaClientError("the broker did not answer these acknowledgements"))
        if refresh:
            with contextlib.suppress(KafkaClientError, OSError, TimeoutError):
                await self._cluster.refresh_metadata()
        return out

    # ------------------------------------------------------------------ acknowledging
    def acknowledge(self, record: ShareRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:  # noqa: A002
        """Explicit mode: say what became of `record` (ACCEPT, RELEASE or REJECT). Sent with the
        next poll or commit."""
        if not self.explicit:
            raise IllegalStateError("acknowledge() needs acknowledgement_mode='explicit'")
        if type not in (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT):
            raise ValueError(f"cannot acknowledge a record as {type!r}")
        if not self._acks.acknowledge(TopicPartition(record.topic, record.partition), record.offset, type):
            raise IllegalStateError(f"{record.topic}-{record.partition}@{record.offset} was not handed out by "
                                    f"this consumer, or is acknowledged already")

    async def commit(self) -> dict[TopicPartition, KafkaClientError | None]:
        """Send the acknowledgements owed now (ShareAcknowledge to each leader) and wait for the
        answers: per partition, None when the broker applied them (durably), else the error."""
        self._check()
        if not self.explicit:
            self._acks.accept_delivered()
        results: dict[TopicPartition, KafkaClientError | None] = {}
        nodes: set[int] = set()
        for tp in list(self._acks.pending):
            leader = self._cluster.leader_for(tp)
            if leader is not None and self._sessions.get(leader, ShareSession()).open:
                nodes.add(leader)
            else:
                err = _sessionless(f"the leader of {tp}")
                self._fail_acks(self._acks.take([tp]), err)
                results[tp] = err
        await asyncio.gather(*(self._acknowledge(node, final=False, results=results) for node in nodes))
        return results

    async def _acknowledge(self, node: int, *, final: bool,
                           results: dict[TopicPartition, KafkaClientError | None] | None = None) -> bool:
        async with self._node_locks[node]:
            s = self._sessions.setdefault(node, ShareSession())
            return await self._acknowledge_locked(node, s, final=final, results=results)

    async def _acknowledge_locked(self, node: int, s: ShareSession, *, final: bool,
                                  results: dict[TopicPartition, KafkaClientError | None] | None = None) -> bool:
        """ShareAcknowledge of what is owed to `node` (closing its session when `final`). False when
        it failed."""
        if not s.open:
            return True
        acks = self._acks_for(node)
        if not acks and not final:
            return True
        topics: dict[uuid.UUID, list[ShareFetchPartition]] = defaultdict(list)
        for tp, batches in acks.items():
            tip = self._tip(tp)
            assert tip is not None
            topics[tip[0]].append(ShareFetchPartition(partition_index=tip[1], acknowledgement_batches=_wire(batches)))
        req = ShareAcknowledgeRequest(group_id=self.group_id, member_id=self._member.member_id,
                                      share_session_epoch=FINAL_EPOCH if final else s.epoch,
                                      topics=[ShareFetchTopic(topic_id=t, partitions=ps) for t, ps in topics.items()])
        try:
            conn = await self._cluster.connection(node)
            resp: ShareAcknowledgeResponse = await conn.request(req, timeout=self.request_timeout)
        except (RetriableError, OSError, TimeoutError) as e:
            s.lost()
            self._fail_acks(acks, ConnectionLostError(f"ShareAcknowledge to broker {node}: {e}"), results)
            return False
        if final:
            s.lost()  # closed
        else:
            s.answered(resp.error_code)
        if resp.error_code:
            self._fail_acks(acks, error_from_code(resp.error_code, resp.error_message or "ShareAcknowledge"), results)
            return False
        done: set[TopicPartition] = set()
        for t in resp.responses:
            for p in t.partitions:
                named = self._tp(t.topic_id, p.partition_index)
                if named is not None and named in acks:
                    done.add(named)
                    err = self._acked(named, acks[named], p.error_code)
                    if results is not None:
                        results[named] = err
        self._fail_acks({tp: b for tp, b in acks.items() if tp not in done},
                        KafkaClientError("the broker did not answer these acknowledgements"), results)
        return True

    def _acked(self, tp: TopicPartition, batches: list[AckBatch], code: int) -> KafkaClientError | None:
        err = error_from_code(code, f"acknowledging {tp}") if code else None
        self._report(tp, batches, err)
        return err

    def _fail_acks(self, acks: dict[TopicPartition, list[AckBatch]], err: KafkaClientError,
                   results: dict[TopicPartition, KafkaClientError | None] | None = None) -> None:
        for tp, batches in acks.items():
            self._report(tp, batches, err)
            if results is not None:
                results[tp] = err

    def _report(self, tp: TopicPartition, batches: list[AckBatch], err: KafkaClientError | None) -> None:
        if self.on_acknowledged is None:
            return
        kinds: dict[int, AcknowledgeType] = {}
        for b in batches:
            for i, o in enumerate(range(b.first, b.last + 1)):
                kinds[o] = AcknowledgeType(b.types[0] if len(b.types) == 1 else b.types[i])
        self.on_acknowledged(tp, kinds, err)


def _wire(batches: list[AckBatch]) -> list[AcknowledgementBatch]:
    return [AcknowledgementBatch(first_offset=b.first, last_offset=b.last, acknowledge_types=list(b.types))
            for b in batches]
