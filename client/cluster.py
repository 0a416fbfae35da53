"""The client's view of the cluster: brokers, topic metadata, coordinators, and pooled connections.

Everything that routes a request (to a partition leader, a group or transaction coordinator, or
any broker) goes through `Cluster`, so connection reuse, reconnect backoff and metadata refresh
live in one place. Metadata is refreshed on demand (a routing error, an unknown topic) and when it
is older than `metadata_max_age`; concurrent refreshes share one request.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from protocol.schema import Message

from .connection import Connection
from .errors import (
    AuthenticationError,
    ConnectionLostError,
    KafkaClientError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    RetriableError,
    error_from_code,
)
from .security import Security
from .structs import TopicPartition

COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1


@dataclass(frozen=True, slots=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: int


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    error: int
    internal: bool
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    topic_id: uuid.UUID | None = None  # Metadata v10+; share groups name topics by id


def parse_bootstrap(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """'h1:9092,h2:9093' or ['h1:9092', ...] -> [(host, port), ...]; port 9092 when omitted."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if not host:
            host, port = port, "9092"
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError(f"no bootstrap servers in {servers!r}")
    return out


class _Backoff:
    """Exponential reconnect backoff with jitter, as Kafka clients do, so a restarting broker is not
    hammered by every client at once."""

    def __init__(self, base: float, maximum: float) -> None:
        self.base, self.maximum = base, maximum
        self.failures = 0
        self.not_before = 0.0

    def failed(self, now: float) -> None:
        delay = min(self.maximum, self.base * (2 ** self.failures))
        self.failures += 1
        self.not_before = now + delay * random.uniform(0.8, 1.2)

    def succeeded(self) -> None:
        self.failures = 0
        self.not_before = 0.0


class Cluster:
    """Connections and metadata shared by the producer, consumer and admin of one client object."""

    def __init__(self, bootstrap_servers: str | Iterable[str], *, client_id: str = "ketch-client",
                 request_timeout: float = 30.0, retry_backoff: float = 0.1, reconnect_backoff: float = 0.05,
                 reconnect_backoff_max: float = 1.0, metadata_max_age: float = 300.0,
                 allow_auto_topic_creation: bool = True, clock: Clock = SYSTEM_CLOCK,
                 security: Security | None = None) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.security = security  # TLS and SASL for every connection (client/security.py)
        self.clock = clock  # every timeout and backoff of this client object (producer, consumer, admin)
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        self.reconnect_backoff = reconnect_backoff
        self.reconnect_backoff_max = reconnect_backoff_max
        self.metadata_max_age = metadata_max_age
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.brokers: dict[int, BrokerNode] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.wanted_topics: set[str] = set()
        self._conns: dict[int | tuple[str, int], Connection] = {}
        self._connecting: dict[int | tuple[str, int], asyncio.Future[Connection]] = {}
        self._backoff: dict[int | tuple[str, int], _Backoff] = {}
        self._coordinators: dict[tuple[int, str], int] = {}
        self._finding: dict[tuple[int, str], asyncio.Task[int]] = {}
        self._refresh: asyncio.Future[None] | None = None
        self._last_refresh = 0.0
        self.metadata_version = 0  # bumped on every refresh; waiters compare it
        self._closed = False

    # ------------------------------------------------------------------ connections
    async def connection(self, node_id: int, *, timeout: float | None = None) -> Connection:
        """A negotiated connection to broker `node_id`, reconnecting (with backoff) when needed."""
        node = self.brokers.get(node_id)
        if node is None:
            await self.refresh_metadata()
            node = self.brokers.get(node_id)
            if node is None:
                raise ConnectionLostError(f"broker {node_id} is not in the cluster metadata")
        return await self._connect(node_id, node.host, node.port, timeout)

    async def _connect(self, key: int | tuple[str, int], host: str, port: int,
                       timeout: float | None) -> Connection:
        conn = self._conns.get(key)
        if conn is not None and not conn.closed and (conn.host, conn.port) == (host, port):
            return conn
        if self._closed:
            raise ConnectionLostError("client is closed")
        pending = self._connecting.get(key)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._connecting[key] = pending
            asyncio.get_running_loop().create_task(self._dial(key, host, port, pending))
        return await asyncio.wait_for(asyncio.shield(pending), timeout or self.request_timeout)

    async def _dial(self, key: int | tuple[str, int], host: str, port: int,
                    result: asyncio.Future[Connection]) -> None:
        backoff = self._backoff.setdefault(key, _Backoff(self.reconnect_backoff, self.reconnect_backoff_max))
        try:
            wait = backoff.not_before - self.clock.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            conn = await Connection.open(host, port, node_id=key if isinstance(key, int) else -1,
                                         client_id=self.client_id, request_timeout=self.request_timeout,
                                         connect_timeout=min(10.0, self.request_timeout), security=self.security)
        except BaseException as e:
            backoff.failed(self.clock.monotonic())
            if not result.done():
                result.set_exception(e if isinstance(e, KafkaClientError)
                                     else ConnectionLostError(f"cannot connect to {host}:{port}: {e!r}"))
                result.exception()  # retrieved: nobody may be waiting any more
        else:
            backoff.succeeded()
            old = self._conns.get(key)
            if old is not None:
                old.close()
            self._conns[key] = conn
            if not result.done():
                result.set_result(conn)
        finally:
            self._connecting.pop(key, None)

    async def any_connection(self) -> Connection:
        """A connection to some live broker: a known one first, else a bootstrap address."""
        for conn in self._conns.values():
            if not conn.closed:
                return conn
        candidates: list[tuple[int | tuple[str, int], str, int]] = [
            (b.node_id, b.host, b.port) for b in self.brokers.values()]
        random.shuffle(candidates)
        candidates += [((h, p), h, p) for h, p in self.bootstrap]
        errors = []
        refused: AuthenticationError | None = None
        for key, host, port in candidates:
            try:
                return await self._connect(key, host, port, None)
            except AuthenticationError as e:
                refused = e
                errors.append(f"{host}:{port}: {e}")
            except (KafkaClientError, OSError, TimeoutError) as e:
                errors.append(f"{host}:{port}: {e}")
        if refused is not None:  # the login is wrong: trying again with it cannot help (Kafka: fatal)
            raise refused
        raise NoBrokersAvailableError("no broker reachable: " + "; ".join(errors))

    async def request(self, node_id: int, msg: Message, **kw: Any) -> Any:
        conn = await self.connection(node_id)
        return await conn.request(msg, **kw)

    async def request_any(self, msg: Message, **kw: Any) -> Any:
        conn = await self.any_connection()
        return await conn.request(msg, **kw)

    # ------------------------------------------------------------------ metadata
    async def refresh_metadata(self, topics: Iterable[str] | None = None, *, all_topics: bool = False) -> None:
        """Fetch metadata for the wanted topics (plus `topics`), or for all topics.

        Callers that arrive while a refresh is running share its result, unless they need topics
        it was not asked for.
        """
        if topics is not None:
            new = set(topics) - self.wanted_topics
            self.wanted_topics |= new
        else:
            new = set()
        if self._refresh is not None and not new and not all_topics:
            await asyncio.shield(self._refresh)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._refresh = fut
        try:
            await self._do_refresh(None if all_topics else sorted(self.wanted_topics))
            fut.set_result(None)
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()
            raise
        finally:
            if self._refresh is fut:
                self._refresh = None

    async def _do_refresh(self, topics: list[str] | None) -> None:
        deadline = self.clock.monotonic() + self.request_timeout
        last: Exception | None = None
        while self.clock.monotonic() < deadline:
            try:
                conn = await self.any_connection()
                v = conn.version_for(MetadataRequest)
                if topics is None:
                    req_topics: list[MetadataRequestTopic] | None = [] if v == 0 else None
                else:
                    req_topics = [MetadataRequestTopic(name=t) for t in topics]
                    if not req_topics and v == 0:
                        # v0 cannot ask for "no topics"; ask for all, it is only brokers we want
                        req_topics = []
                resp: MetadataResponse = await conn.request(
                    MetadataRequest(topics=req_topics, allow_auto_topic_creation=self.allow_auto_topic_creation),
                    version=v)
                self._apply(resp, replace_all=topics is None)
                return
            except (RetriableError, OSError, TimeoutError) as e:
                last = e
                await asyncio.sleep(self.retry_backoff)
        raise KafkaTimeoutError(f"metadata refresh failed within {self.request_timeout}s: {last}")

    def _apply(self, resp: MetadataResponse, *, replace_all: bool) -> None:
        if resp.brokers:
            self.brokers = {b.node_id: BrokerNode(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
        self.cluster_id = resp.cluster_id
        self.controller_id = resp.controller_id
        topics = {} if replace_all else dict(self.topics)
        for t in resp.topics:
            if t.name is None:
                continue
            tid = getattr(t, "topic_id", None)
            topic_id = tid if tid is not None and tid.int else None
            known = self.topics.get(t.name)
            cached = known.partitions if known is not None and known.topic_id == topic_id else {}
            parts = {}
            for p in t.partitions:
                info = PartitionInfo(p.partition_index, p.leader_id, p.leader_epoch,
                                     tuple(p.replica_nodes), tuple(p.isr_nodes), p.error_code)
                old = cached.get(p.partition_index)
                # A broker behind on the metadata log (or back from a stall) answers from its old
                # view: an older leader epoch is not news (KIP-320, as Java's Metadata). Taken, it
                # sent fetches to a stale leader whose shorter log answered OFFSET_OUT_OF_RANGE,
                # and the consumer reset to the earliest offset (simulation seed 4292).
                parts[p.partition_index] = old if old is not None and 0 <= info.leader_epoch < old.leader_epoch \
                    else info
            topics[t.name] = TopicInfo(t.name, t.error_code, t.is_internal, parts, topic_id)
        self.topics = topics
        self._last_refresh = self.clock.monotonic()
        self.metadata_version += 1

    @property
    def metadata_stale(self) -> bool:
        return self.clock.monotonic() - self._last_refresh > self.metadata_max_age

    def leader_for(self, tp: TopicPartition) -> int | None:
        t = self.topics.get(tp.topic)
        if t is None:
            return None
        p = t.partitions.get(tp.partition)
        if p is None or p.leader < 0 or p.leader not in self.brokers:
            return None
        return p.leader

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this id, None while the metadata does not know it."""
        return next((t.name for t in self.topics.values() if t.topic_id == topic_id), None)

    def described(self, topic: str) -> TopicInfo:
        """`topic` as the last metadata described it; a topic it did not find, or reported an
        error for, raises that error (UNKNOWN_TOPIC_OR_PARTITION when it was not asked about)."""
        t = self.topics.get(topic)
        if t is None or t.error:
            raise error_from_code(t.error if t is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topic)
        return t

    def partitions_for(self, topic: str) -> int | None:
        """Number of partitions of `topic`, None while unknown."""
        t = self.topics.get(topic)
        if t is None or t.error or not t.partitions:
            return None
        return len(t.partitions)

    async def wait_for_topic(self, topic: str, timeout: float | None = None) -> int:
        """The partition count of `topic`, refreshing metadata until it is known."""
        n = self.partitions_for(topic)
        if n is not None:
            return n
        deadline = self.clock.monotonic() + (timeout if timeout is not None else self.request_timeout)
        while True:
            await self.refresh_metadata([topic])
            n = self.partitions_for(topic)
            if n is not None:
                return n
            t = self.topics.get(topic)
            if t is not None and t.error and not ErrorCode(t.error).retriable:
                raise error_from_code(t.error, f"topic {topic}")
            if self.clock.monotonic() >= deadline:
                code = t.error if t is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                raise KafkaTimeoutError(f"topic {topic} not available: {ErrorCode(code or 3).name}")
            await asyncio.sleep(self.retry_backoff)

    # ------------------------------------------------------------------ offsets by time
    async def list_offsets(self, tps: Iterable[TopicPartition], timestamp: int, *,
                           read_committed: bool = False) -> dict[TopicPartition, int]:
        """Offsets of `tps` at `timestamp` (-2 earliest, -1 latest: the LSO at read_committed),
        each asked of its partition's leader: only the leader knows its high watermark and LSO.
        A partition whose leader does not answer (its connection refused, no leader yet, a
        retriable error such as NOT_LEADER_OR_FOLLOWER) is asked again after a metadata refresh
        until the request timeout, as Java's endOffsets does: right after a leader dies the
        metadata still names it until the controller fences it."""
        wanted = list(tps)
        deadline = self.clock.monotonic() + self.request_timeout
        out: dict[TopicPartition, int] = {}
        while True:
            pending = [tp for tp in wanted if tp not in out]
            await self.refresh_metadata({tp.topic for tp in pending})
            last = await self._list_offsets_once(pending, timestamp, read_committed, out)
            if last is None:
                return out
            if self.clock.monotonic() >= deadline:
                raise KafkaTimeoutError(f"ListOffsets not answered within {self.request_timeout}s: {last}")
            await asyncio.sleep(self.retry_backoff)

    async def _list_offsets_once(self, tps: list[TopicPartition], timestamp: int, read_committed: bool,
                                 out: dict[TopicPartition, int]) -> Exception | None:
        """One round: every leader asked once, the answers put in `out`; the last retriable
        failure (None if every partition was answered). A fatal error raises."""
        last: Exception | None = None
        by_node: dict[int, dict[str, list[ListOffsetsPartition]]] = {}
        for tp in tps:
            leader = self.leader_for(tp)
            if leader is None:
                last = error_from_code(ErrorCode.LEADER_NOT_AVAILABLE, f"{tp}")
                continue
            by_node.setdefault(leader, {}).setdefault(tp.topic, []).append(
                ListOffsetsPartition(partition_index=tp.partition, timestamp=timestamp))
        for node, by_topic in by_node.items():
            try:
                conn = await self.connection(node)
                v = conn.version_for(ListOffsetsRequest)
                resp = await conn.request(ListOffsetsRequest(
                    replica_id=-1, isolation_level=1 if read_committed else 0,
                    topics=[ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()]), version=v)
            except (RetriableError, OSError, TimeoutError) as e:
                last = e
                continue
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code:
                        err = error_from_code(p.error_code, f"ListOffsets {t.name}-{p.partition_index}")
                        if not isinstance(err, RetriableError):
                            raise err
                        last = err
                        continue
                    off = p.offset if v >= 1 else (p.old_style_offsets[0] if p.old_style_offsets else -1)
                    out[TopicPartition(t.name, p.partition_index)] = off
        return last

    # ------------------------------------------------------------------ coordinators
    async def coordinator(self, key: str, key_type: int = COORDINATOR_GROUP, *,
                          timeout: float | None = None) -> int:
        """Node id of the group (key_type 0) or transaction (1) coordinator for `key`.

        Retries the retriable answers (COORDINATOR_NOT_AVAILABLE while the internal topic is being
        created, load in progress) until `timeout`. Concurrent callers for the same key (the
        heartbeat and a commit, after the coordinator moved) share one lookup.
        """
        cached = self._coordinators.get((key_type, key))
        if cached is not None:
            return cached
        running = self._finding.get((key_type, key))
        if running is None or running.done():
            running = asyncio.get_running_loop().create_task(self._find_coordinator(key, key_type, timeout))
            self._finding[(key_type, key)] = running
            running.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved: callers may be gone
        try:
            return await asyncio.wait_for(asyncio.shield(running), timeout)
        except TimeoutError:
            raise KafkaTimeoutError(f"no coordinator for {key!r} within {timeout}s") from None
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if running.cancelled() and me is not None and not me.cancelling():
                raise ConnectionLostError("client is closed") from None  # close() stopped the lookup, not us
            raise

    async def _find_coordinator(self, key: str, key_type: int, timeout: float | None) -> int:
        deadline = self.clock.monotonic() + (timeout if timeout is not None else self.request_timeout)
        last: Exception | None = None
        while True:
            try:
                conn = await self.any_connection()
                v = conn.version_for(FindCoordinatorRequest)
                if v >= 4:
                    req = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
                else:
                    req = FindCoordinatorRequest(key=key, key_type=key_type)
                resp: FindCoordinatorResponse = await conn.request(req, version=v)
                if v >= 4:
                    c = resp.coordinators[0]
                    error, node_id, host, port, msg = c.error_code, c.node_id, c.host, c.port, c.error_message
                else:
                    error, node_id, host, port, msg = (resp.error_code, resp.node_id, resp.host, resp.port,
                                                       resp.error_message)
                if error:
                    raise error_from_code(error, msg)
                if node_id not in self.brokers or (self.brokers[node_id].host, self.brokers[node_id].port) != (
                        host, port):
                    self.brokers[node_id] = BrokerNode(node_id, host, port)
                self._coordinators[(key_type, key)] = node_id
                return node_id
            except (RetriableError, OSError, TimeoutError) as e:
                last = e
            if self.clock.monotonic() >= deadline:
                raise KafkaTimeoutError(f"no coordinator for {key!r} within the deadline: {last}")
            await asyncio.sleep(self.retry_backoff)

    def forget_coordinator(self, key: str, key_type: int = COORDINATOR_GROUP) -> None:
        self._coordinators.pop((key_type, key), None)

    # ------------------------------------------------------------------ lifecycle
    async def close(self) -> None:
        self._closed = True
        for task in self._finding.values():
            task.cancel()
        for conn in list(self._conns.values()):
            conn.close()
        self._conns.clear()
        await asyncio.sleep(0)  # let the read tasks see their cancellation
