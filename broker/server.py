"""The network layer: frames in, handlers run, responses out in request order per connection.

Each connection is an asyncio.Protocol (cheaper than streams on the hot path). Requests on one
connection are handled concurrently — a long-polling fetch must not hold up the produce behind
it on another client's connection, and a pipelining client gets its answers as soon as each
earlier one is ready — but responses are written strictly in request order, as Kafka requires.

Requests to the transaction coordinator are the exception: they may park (the coordinator waits
for the previous transaction to complete, and for its own log to be durable), and what comes
after them on the connection may depend on their outcome — a produce after AddPartitionsToTxn,
an EndTxn after the produces of its transaction. Kafka processes a connection's requests one at a
time; here such a request starts only once every earlier request of its connection has finished,
and every later request starts only once it has finished (ORDERED_APIS).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
import uuid
from collections import deque
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import structlog

from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.errors import ErrorCode, KafkaError
from protocol.framing import FrameError, FrameReader, encode_response
from protocol.headers import (
    RequestHeader,
    read_request_header,
)
from protocol.messages.api_versions import ApiVersionsResponse
from protocol.messages.metadata_records import NoOpRecord, unframe_batch
from protocol.messages.registry import REQUESTS
from protocol.primitives import DecodeError, Reader
from protocol.supported import API_NAMES, CONTROLLER_SUPPORTED, SUPPORTED, api_versions_table
from storage.fs import OS_FS, FileSystem, mkdir_durable

from .apis import CONTROLLER_HANDLERS, HANDLERS
from .config import BrokerConfig, ConfigError, parse_host_port
from .context import BrokerContext, ClientInfo
from .controller.client import ControllerClient
from .controller.quorum_controller import QuorumController
from .controller.shell import ControllerShell
from .fetch_session import FetchSessionCache
from .forwarding import ControllerForwarder
from .group import GroupCoordinator
from .housekeeping import Housekeeper
from .lifecycle import BrokerLifecycle, mark_clean_shutdown, take_clean_shutdown_epoch
from .loop_watch import LoopWatch
from .metadata.image import MetadataImage
from .metrics import BrokerMetrics
from .metrics_http import MetricsEndpoint
from .metrics_render import render
from .partition import Partition
from .partition.replica_state import Assignment, IsrChange
from .producer_ids import ProducerIdAllocator, legacy_producer_id_floor
from .propagation import Propagation
from .quorum.messages import Entry, Snapshot
from .quorum.shell import METADATA_DIR, QuorumShell
from .replication.fetcher import ReplicaFetcher
from .replication.manager import ReplicaManager
from .throttle import listed
from .topics import TopicTable
from .txn.coordinator import TransactionCoordinator

log = structlog.get_logger()

_conn_ids = itertools.count(1)

# InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit.
ORDERED_APIS = frozenset({22, 24, 25, 26, 28})


async def _after(earlier: set[asyncio.Task[Any]], handler: Coroutine[Any, Any, Any]) -> Any:
    """Run `handler` once every task of `earlier` is done (whatever their outcome)."""
    try:
        await asyncio.wait(earlier)
    except BaseException:
        handler.close()  # never started: no "coroutine was never awaited" on a closed connection
        raise
    return await handler


class _Slot:
    """A place in the per-connection response queue, filled when its handler finishes."""

    __slots__ = ("frame", "done")

    def __init__(self) -> None:
        self.frame: bytes | None = None
        self.done = False


class Connection(asyncio.Protocol):
    def __init__(self, server: BrokerServer, endpoint: tuple[str, int], inter_broker: bool,
                 controller: bool = False) -> None:
        self.server = server
        self.supported = CONTROLLER_SUPPORTED if controller else SUPPORTED
        self.handlers = CONTROLLER_HANDLERS if controller else HANDLERS
        self.transport: asyncio.Transport | None = None
        # a frame too short for a request header is garbage; one over the limit is refused unread
        self.frames = FrameReader(min_size=8, max_size=server.cfg.socket_request_max_bytes)
        self.slots: deque[_Slot] = deque()
        self.info = ClientInfo(next(_conn_ids), "?", endpoint, inter_broker, controller=controller)
        self.closed = False
        self.reading_paused = False
        self.tasks: set[asyncio.Task[Any]] = set()
        self.barrier: asyncio.Task[Any] | None = None  # the last ORDERED_APIS request still running

    # ---- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.info.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.server.connections.add(self)
        self.server.metrics.connections_accepted += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        self.server.ctx.fetch_sessions.close_owner(self.info.conn_id)
        for t in self.tasks:
            t.cancel()

    def data_received(self, data: bytes) -> None:
        self.server.metrics.bytes_received += len(data)
        if self.closed:
            return
        bad: FrameError | None = None
        try:
            frames = self.frames.feed(data)
        except FrameError as e:
            frames, bad = e.complete, e
        for frame in frames:
            if self.closed:
                return
            self._dispatch(frame)
        if bad is not None:
            self._abort("invalid frame size", size=bad.size, limit=self.frames.max_size)
            return
        if len(self.slots) >= self.server.cfg.max_pipelined_requests and not self.reading_paused and self.transport:
            self.reading_paused = True
            self.transport.pause_reading()

    # ---- requests --------------------------------------------------------------------------
    def _abort(self, reason: str, **kw: Any) -> None:
        """Close a connection that sent something we cannot answer; logged once per connection."""
        if self.closed:
            return
        log.warning("closing connection: " + reason, conn=self.info.conn_id, peer=self.info.peer,
                    client_id=self.info.client_id, **kw)
        self.server.metrics.connections_aborted[reason] += 1
        self.closed = True
        if self.transport:
            self.transport.close()

    def _dispatch(self, frame: bytes) -> None:
        r = Reader(frame)
        api_key = int.from_bytes(frame[0:2], "big", signed=True)
        req_cls = REQUESTS.get(api_key)
        try:
            header = read_request_header(r, req_cls.FLEXIBLE if req_cls else None)
        except DecodeError as e:
            self._abort("malformed request header", error=str(e))
            return
        self.info.client_id = header.client_id
        supported = self.supported.get(api_key)
        if supported is None or req_cls is None:
            self._abort("unknown API key", api_key=api_key, api_version=header.api_version)
            return
        lo, hi = supported
        if not lo <= header.api_version <= hi:
            if api_key == 18:
                # Kafka's fallback: error 35 and our ranges in a v0 body, so the client can retry.
                resp = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,
                                           api_keys=api_versions_table(self.supported))
                hdr = RequestHeader(18, 0, header.correlation_id, header.client_id)
                self._queue_done(encode_response(hdr, resp))
                log.info("unsupported ApiVersions version, answered with v0 ranges", conn=self.info.conn_id,
                         version=header.api_version, client_id=header.client_id)
                return
            self._abort("unsupported API version", api=API_NAMES.get(api_key, api_key),
                        api_version=header.api_version, supported=f"{lo}-{hi}")
            return
        try:
            req = req_cls.read(r, header.api_version)
        except (DecodeError, UnicodeDecodeError, ValueError) as e:
            self._abort("malformed request body", api=API_NAMES.get(api_key, api_key),
                        api_version=header.api_version, error=str(e))
            return
        handler = self.handlers[api_key]
        slot = _Slot()
        self.slots.append(slot)
        coro = handler(self.server.ctx, self.info, header, req)
        ordered = api_key in ORDERED_APIS
        if self.barrier is not None and self.barrier.done():
            self.barrier = None
        earlier = set(self.tasks) if ordered else ({self.barrier} if self.barrier else set())
        if earlier:
            coro = _after(earlier, coro)
        task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(coro)
        if ordered:
            self.barrier = task
        self.tasks.add(task)
        started = time.perf_counter()
        task.add_done_callback(lambda t: self._finished(t, slot, header, started))

    def _queue_done(self, frame: bytes | None) -> None:
        slot = _Slot()
        slot.frame = frame
        slot.done = True
        self.slots.append(slot)
        self._flush()

    def _finished(self, task: asyncio.Task[Any], slot: _Slot, header: RequestHeader, started: float) -> None:
        self.tasks.discard(task)
        m = self.server.metrics
        m.requests[header.api_key] += 1
        m.request_seconds[header.api_key] += time.perf_counter() - started
        if task.cancelled() or self.closed:
            return
        exc = task.exception()
        if exc is not None:
            log.error("handler failed", api=API_NAMES.get(header.api_key), api_version=header.api_version,
                      conn=self.info.conn_id, exc_info=exc)
            self._abort("internal error in handler")
            return
        resp = task.result()
        if resp is not None:
            try:
                slot.frame = encode_response(header, resp)
            except Exception as e:  # a bug of ours; the client must not hang on it
                log.error("response encoding failed", api=API_NAMES.get(header.api_key),
                          api_version=header.api_version, exc_info=e)
                self._abort("internal error encoding response")
                return
        slot.done = True
        self._flush()

    def _flush(self) -> None:
        slots = self.slots
        transport = self.transport
        while slots and slots[0].done:
            frame = slots.popleft().frame
            if frame is not None and transport is not None and not self.closed:
                transport.write(frame)
                self.server.metrics.bytes_sent += len(frame)
        if self.reading_paused and len(slots) < self.server.cfg.max_pipelined_requests // 2 and transport:
            self.reading_paused = False
            transport.resume_reading()


WRITE_PROBE = ".ketch-write-probe"  # created and removed at start: can the broker write there?
UNFENCE_LOG_S = 5.0  # how often a broker waiting to be unfenced says so


class BrokerServer:
    """One broker process: the listener, the topic table and the shared services handlers use."""

    def __init__(self, cfg: BrokerConfig, clock: Clock = SYSTEM_CLOCK, fs: FileSystem = OS_FS) -> None:
        self.cfg = cfg
        self.clock = clock
        self.fs = fs  # the partition logs', the metadata log's and the shutdown marker's files
        self.metrics = BrokerMetrics()
        self.loop_watch = LoopWatch(self.metrics, clock=clock)
        self.topics = TopicTable(cfg, clock, fs)
        self.topics.on_metadata_dir_failure = self._metadata_dir_failed
        self.controller = QuorumController(legacy_producer_id_floor(Path(cfg.metadata_dir)),
                                           cfg.broker_session_timeout_ms, cfg.min_insync_replicas)
        self.quorum = QuorumShell(cfg.node_id, cfg.voter_map(), Path(cfg.metadata_dir) / METADATA_DIR, cfg.cluster_id,
                                  on_commit=self._on_metadata, on_restore=self._on_metadata_snapshot,
                                  snapshot_every=cfg.metadata_snapshot_records,
                                  snapshot_state=lambda: self.controller.image.to_snapshot(), fs=fs, clock=clock)
        self.quorum.on_role_change = lambda role: self.controller.reset()
        self.controller_shell = ControllerShell(self.quorum, self.controller)
        self.topics.writer = self.controller_client = ControllerClient(cfg.node_id, self.controller_shell,
                                                                       self.quorum.leader_address)
        self.producer_ids = ProducerIdAllocator(cfg.node_id, self.quorum.leader_address, lambda: self.lifecycle.epoch)
        self.lifecycle = BrokerLifecycle(cfg.node_id, cfg.cluster_id, self._listeners, cfg.rack,
                                         self.quorum.leader_address, lambda: self.controller.image.offset,
                                         cfg.broker_heartbeat_interval_ms / 1000, cfg.broker_session_timeout_ms / 1000,
                                         clock=clock, online_dirs=lambda: self.topics.log_dirs.online_ids,
                                         offline_dirs=lambda: self.topics.log_dirs.offline_ids,
                                         assignments=self.topics.dir_assignments)
        self.topics.on_log_dir_failure = self.lifecycle.wake
        self._controller_task: asyncio.Task[None] | None = None
        fetcher = ReplicaFetcher(cfg.node_id, self._broker_address, self._topic_id, throttled=self._throttled,
                                 throttled_rate=cfg.follower_replication_throttled_rate,
                                 broker_epoch=lambda: self.lifecycle.epoch, clock=clock)
        self.replication = ReplicaManager(self.topics, fetcher,
                                          self._alter_partition, cfg.replica_lag_time_max_ms)
        self.groups = GroupCoordinator(cfg, self.topics, clock, self.lifecycle.lease_held)
        self.txn = TransactionCoordinator(cfg, self.topics, self.producer_ids, self.metrics, clock,
                                          self._broker_address)
        self.propagation = Propagation(cfg.node_id, lambda: self.topics.image, self._broker_address, clock)
        self.forwarder = ControllerForwarder(cfg.node_id, self.quorum)
        self.ctx = BrokerContext(cfg.node_id, cfg, clock, self.topics, self.groups, self.txn, self.producer_ids,
                                 self.metrics, self.quorum, self.controller, self.controller_shell, self.replication,
                                 self.controller_client, self.propagation, self.forwarder,
                                 FetchSessionCache(cfg.max_incremental_fetch_session_cache_slots))
        self.connections: set[Connection] = set()
        self._metrics_endpoint: MetricsEndpoint | None = None
        self._server: asyncio.Server | None = None
        self._inter_broker_server: asyncio.Server | None = None
        self._controller_server: asyncio.Server | None = None
        self.controller_endpoint: tuple[str, int] = ("127.0.0.1", 0)  # known once bound
        self.inter_broker_endpoint: tuple[str, int] | None = None  # known once bound
        self.housekeeper = Housekeeper(self.topics, clock, cfg.log_retention_check_interval_ms,
                                       cfg.log_checkpoint_interval_ms, cfg.producer_id_expiration_check_interval_ms,
                                       log_io=self.topics.log_io)
        self._retention_task: asyncio.Task[None] | None = None
        self._orphan_sweep: asyncio.Task[None] | None = None
        self.started_ms = clock.now_ms()

    @property
    def node_id(self) -> int:
        return self.cfg.node_id

    def _metadata_dir_failed(self) -> None:
        """The log directory holding the metadata log failed, or the last one online: Kafka halts
        the broker, since it can neither follow the metadata nor be sure of what it wrote (nor hold
        any replica); the other brokers take over."""
        log.critical("the metadata log's directory, or the last log directory online, failed: stopping the broker",
                     metadata_dir=self.cfg.metadata_dir)
        os._exit(1)

    def _broker_address(self, node: int) -> tuple[str, int] | None:
        """Where broker `node` takes inter-broker requests (markers, verification): its BROKER
        listener as registered in the metadata image; ourselves, the bound listener."""
        if node == self.cfg.node_id:
            return self.inter_broker_endpoint
        b = self.controller.image.broker(node)
        if b is None or b.fenced or not b.inter_broker_port:
            return None
        return b.inter_broker_host, b.inter_broker_port

    def _topic_id(self, name: str) -> uuid.UUID:
        t = self.topics.image.topics.get(name)
        return t.topic_id if t is not None else uuid.UUID(int=0)

    async def _alter_partition(self, part: Partition, change: IsrChange) -> tuple[ErrorCode, Assignment | None]:
        """A leader's ISR change to the active controller, in this broker's registration epoch."""
        epoch = self.lifecycle.epoch
        a = part.assignment
        if epoch is None or a is None:
            return ErrorCode.STALE_BROKER_EPOCH, None
        code, info = await self.controller_client.alter_partition(
            epoch, self._topic_id(part.topic), part.index, change.leader_epoch, change.partition_epoch,
            part.member_epochs(change.new_isr, epoch))
        if code or info is None:
            return code, None
        return code, Assignment(a.replicas, frozenset(info.isr), info.leader, info.leader_epoch, info.partition_epoch)

    async def start(self) -> None:
        self.loop_watch.start()  # start-up (log recovery, metadata replay) is where stalls were seen
        await self._bind()
        # The metadata log's directory must be usable (Kafka stops too); another log directory
        # that is not is only offline (broker/log_dirs.py).
        cfg = self.cfg
        setting = "metadata_log_dir" if cfg.metadata_log_dir else "log_dirs" if cfg.log_dirs else "data_dir"
        metadata_dir = Path(cfg.metadata_dir)
        try:
            mkdir_durable(self.fs, metadata_dir)  # a power cut must not take it (and the quorum's vote)
        except OSError as e:
            raise ConfigError(setting, cfg.metadata_dir, f"cannot create the directory: {e.strerror}") from None
        probe = metadata_dir / WRITE_PROBE
        try:  # through the file system, not os.access: a simulated disk has no real directory
            self.fs.open(probe, create=True, truncate=True).close()
            self.fs.unlink(probe)
        except OSError:
            raise ConfigError(setting, cfg.metadata_dir, "the directory is not writable") from None
        # Recovering a large log after a crash is long work: keep it off the loop (nothing else
        # touches the table before start() returns).
        await asyncio.to_thread(self.topics.load)  # refuses an unreadable data directory first
        legacy = self.topics.legacy_topics()
        if legacy and self.cfg.voter_map():
            raise ConfigError("data_dir", self.cfg.metadata_dir,
                              "topics.json of a single-node Ketch: start this data directory once without "
                              "voters so that its topics move into the metadata log")
        self.topics.may_lead = False  # until our registration applies: see _when_registered
        await self.quorum.start()  # replays the metadata log (the topics' logs open); alone, it leads at once
        if legacy:
            await self._migrate(legacy)
        await self.groups.start()  # loads __consumer_offsets in the background
        self.txn.load()  # rebuilt from __transaction_state before any request can reach it
        if self._metrics_endpoint:  # serving before the Kafka port: ready means both
            await self._metrics_endpoint.start()
        assert self._server is not None and self._inter_broker_server is not None
        await self._inter_broker_server.start_serving()  # the marker sender talks to it
        assert self._controller_server is not None
        await self._controller_server.start_serving()
        self.lifecycle.previous_epoch = take_clean_shutdown_epoch(self.fs, Path(self.cfg.metadata_dir))
        self.lifecycle.start()
        self.replication.start()
        self._controller_task = asyncio.get_running_loop().create_task(self._fence_silent_brokers())
        # Clients are served only once the controller has unfenced this broker, however long that
        # takes (a quorum still forming, the controller unreachable), as Kafka's brokers wait: a
        # fenced broker is in nobody's metadata, holds no leadership, and answers every request
        # with an error that sends the client elsewhere, or nowhere (librdkafka's coordinator
        # lookup gave up re-driving on such answers).
        while True:
            try:
                await asyncio.wait_for(self.lifecycle.registered.wait(), UNFENCE_LOG_S)
                break
            except TimeoutError:
                log.warning("not unfenced by an active controller yet; not serving clients until then",
                            registered=self.lifecycle.epoch is not None)
        self._orphan_sweep = asyncio.get_running_loop().create_task(self._when_registered())
        if not await self.producer_ids.first_block(timeout=10.0):
            log.warning("no producer-id block yet (no quorum leader?); InitProducerId answers "
                        "COORDINATOR_LOAD_IN_PROGRESS until one comes")
        await self._server.start_serving()
        loop = asyncio.get_running_loop()
        self._retention_task = loop.create_task(self.housekeeper.run())
        await self.txn.start()  # marker sender (talks to our own listener) and reaper
        host, port = self.cfg.advertised_host_port
        ib_host, ib_port = self._inter_broker_advertised()
        log.info("broker started", node_id=self.cfg.node_id, listen=self.cfg.listen, advertise=f"{host}:{port}",
                 inter_broker=f"{ib_host}:{ib_port}",
                 log_dirs=[str(d.path) for d in self.topics.log_dirs.dirs],
                 metrics=self.cfg.metrics_listen or None)

    def _throttled(self, part: Partition) -> bool:
        """A replica a reassignment is adding here, or one its topic lists as a throttled
        follower: it shares follower_replication_throttled_rate (replication/throttle.py)."""
        info = self.topics.image.topics.get(part.topic)
        if info is None or part.index >= len(info.partitions):
            return False
        if self.cfg.node_id in info.partitions[part.index].adding:
            return True
        value = info.configs.get("follower.replication.throttled.replicas", "")
        return bool(value) and listed(value, part.index, self.cfg.node_id)

    async def _when_registered(self) -> None:
        """Lead partitions and delete partition directories the image does not assign here — but
        only once the controller has unfenced this broker, which it does when the broker's image has
        reached the broker's own registration. Before that, the image replayed from the local
        metadata log is stale: it may predate topics this broker already holds data for (sweeping
        then deleted acknowledged data), and it may name this broker leader at an epoch whose data
        the crash tore off (leading then made followers truncate acknowledged writes to match). The
        registration entry moves this broker's leaderships to in-sync replicas first."""
        await self.lifecycle.registered.wait()
        self.topics.allow_leading()
        self.topics.remove_orphans()

    async def _bind(self) -> None:
        """Take the listening ports before touching the data directory, so a taken port (or a
        host that is not ours) is a one-line error and not a half-started broker."""
        loop = asyncio.get_running_loop()
        cfg = self.cfg
        client_endpoint = cfg.advertised_host_port
        try:
            self._server = await loop.create_server(
                lambda: Connection(self, client_endpoint, False), cfg.listen_host, cfg.listen_port,
                reuse_address=True, backlog=1024, start_serving=False)
        except OSError as e:
            raise ConfigError("listen", cfg.listen, f"cannot listen there: {e.strerror or e}") from None
        ib_host, ib_port = parse_host_port("inter_broker_listen", cfg.inter_broker_listen)
        try:
            self._inter_broker_server = await loop.create_server(
                lambda: Connection(self, self._inter_broker_advertised(), True), ib_host or "0.0.0.0", ib_port,
                reuse_address=True, start_serving=False)
        except OSError as e:
            self._server.close()
            raise ConfigError("inter_broker_listen", cfg.inter_broker_listen,
                              f"cannot listen there: {e.strerror or e}") from None
        bound = self._inter_broker_server.sockets[0].getsockname()
        self.inter_broker_endpoint = ("127.0.0.1" if ib_host in ("0.0.0.0", "", "::") else ib_host), bound[1]
        await self._bind_controller()
        if self.cfg.metrics_listen:
            m_host, m_port = parse_host_port("metrics_listen", self.cfg.metrics_listen)
            self._metrics_endpoint = MetricsEndpoint(
                lambda: render(self.ctx, len(self.connections), self.started_ms), m_host or "0.0.0.0", m_port)
            try:
                await self._metrics_endpoint.bind()
            except OSError as e:
                self._server.close()
                raise ConfigError("metrics_listen", self.cfg.metrics_listen,
                                  f"cannot listen there: {e.strerror or e}") from None

    def _on_metadata(self, entry: Entry) -> None:
        """A committed metadata entry: its records applied to the image together, or — if this
        broker cannot read or apply one of them — logged and skipped whole (never half-applied).
        The topic table then follows the new image."""
        try:
            records = unframe_batch(entry.data)
            self.controller.replay_all(entry.offset, records)
        except (DecodeError, ValueError) as e:
            log.error("metadata entry not applied", offset=entry.offset, epoch=entry.epoch, error=str(e))
            return
        if all(isinstance(r, NoOpRecord) for r in records):
            return  # the quorum leader's keep-alive (quorum/lease.py): nothing else follows from it
        self.topics.apply_image(self.controller.image)
        self.txn.sender.poke()  # markers waiting for a leader, or for a broker's address

    async def _migrate(self, legacy: list[dict[str, Any]]) -> None:
        """Turn a topics.json (Ketch before the quorum) into metadata records, once: the same
        names, ids, partition counts and configs, every partition led here as before."""
        for t in legacy:
            if t["name"] in self.controller.image.topics:
                continue
            await self.controller_shell.adopt_topic(t["name"], uuid.UUID(t["id"]), t["partitions"],
                                                    t.get("configs", {}), self.cfg.node_id)
        self.topics.retire_legacy_file()

    def _listeners(self) -> list[tuple[str, str, int]]:
        """What this broker registers: its client listener (PLAINTEXT) and inter-broker one (BROKER)."""
        host, port = self.cfg.advertised_host_port
        ib_host, ib_port = self._inter_broker_advertised()
        return [("PLAINTEXT", host, port), ("BROKER", ib_host, ib_port)]

    async def _fence_silent_brokers(self) -> None:
        """On the quorum leader: write the cluster-wide min.insync.replicas if the log has none
        (Kafka 4.1's activation record), fence brokers whose heartbeats stopped, finish reassignments
        whose new replicas are in sync, and every `leader_imbalance_check_interval_ms` give
        partitions back to their preferred replica (Kafka's auto leader rebalance). The
        controller decides all of it."""
        next_rebalance = self.clock.monotonic_ms() + self.cfg.leader_imbalance_check_interval_ms
        while True:
            await asyncio.sleep(0.5)
            if not self.quorum.serving:
                continue
            with contextlib.suppress(KafkaError):  # leadership lost meanwhile: the next leader decides
                await self.controller_shell.run(lambda: (self.controller.activate(), None))
                await self.controller_shell.run(lambda: (self.controller.expire(self.clock.monotonic_ms()), None))
                await self.controller_shell.run(lambda: (self.controller.complete_reassignments(), None))
                if self.clock.monotonic_ms() >= next_rebalance:
                    next_rebalance = self.clock.monotonic_ms() + self.cfg.leader_imbalance_check_interval_ms
                    await self.controller_shell.run(lambda: (self.controller.rebalance_leaders(), None))

    def _on_metadata_snapshot(self, snapshot: Snapshot) -> None:
        """The image restarts from a snapshot (at start, or sent by the quorum leader)."""
        self.controller.image = MetadataImage.from_snapshot(snapshot.data)
        self.controller.reset()
        self.topics.apply_image(self.controller.image)

    async def _bind_controller(self) -> None:
        """The controller listener: this node's place in the metadata quorum. With `voters` it is
        the address the voters name for this node; alone, `controller_listen` (any free port)."""
        cfg = self.cfg
        voters = cfg.voter_map()
        if voters:
            host, port = voters[cfg.node_id]
            setting, value = "voters", cfg.voters
        else:
            host, port = parse_host_port("controller_listen", cfg.controller_listen)
            setting, value = "controller_listen", cfg.controller_listen
        loop = asyncio.get_running_loop()
        try:
            self._controller_server = await loop.create_server(
                lambda: Connection(self, self.controller_endpoint, False, controller=True), host or "0.0.0.0", port,
                reuse_address=True, start_serving=False)
        except OSError as e:
            for srv in (self._server, self._inter_broker_server):
                if srv is not None:
                    srv.close()
            raise ConfigError(setting, value, f"cannot listen there (controller listener): {e.strerror or e}") from None
        bound = self._controller_server.sockets[0].getsockname()
        self.controller_endpoint = ("127.0.0.1" if host in ("0.0.0.0", "", "::") else host), bound[1]
        if not voters:
            self.quorum.voters = {cfg.node_id: self.controller_endpoint}

    def _inter_broker_advertised(self) -> tuple[str, int]:
        if self.cfg.inter_broker_advertise:
            return parse_host_port("inter_broker_advertise", self.cfg.inter_broker_advertise)
        assert self.inter_broker_endpoint is not None
        return self.inter_broker_endpoint

    async def stop(self) -> None:
        if self._retention_task:
            self._retention_task.cancel()
        if self._orphan_sweep:
            self._orphan_sweep.cancel()
        if self._metrics_endpoint:
            await self._metrics_endpoint.stop()
        await self.producer_ids.stop()
        if len(self.controller.image.live_brokers()) > 1:
            await self.lifecycle.shut_down(timeout=5.0)  # leaderships move to other brokers first
        await self.lifecycle.stop()
        await self.replication.stop()
        self.controller_client.close()
        if self._controller_task:
            self._controller_task.cancel()
        await self.quorum.stop()
        servers = [srv for srv in (self._server, self._inter_broker_server, self._controller_server) if srv is not None]
        for srv in servers:
            srv.close()
        for c in list(self.connections):
            if c.transport:
                c.transport.close()
        for srv in servers:
            await srv.wait_closed()
        await self.txn.stop()
        self.propagation.close()
        self.forwarder.close()
        await self.groups.stop()
        self.topics.close()
        mark_clean_shutdown(self.fs, Path(self.cfg.metadata_dir), self.lifecycle.epoch)  # every log flushed and closed
        self.loop_watch.stop()
        log.info("broker stopped", node_id=self.cfg.node_id)
