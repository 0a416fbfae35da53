"""One broker node: what it is made of, and the order it starts and stops in.

The broker's parts each live in their own module — the connection protocol (connection.py), the
request handlers (apis/), the metadata image and who follows it (metadata/publisher.py), the
quorum (quorum/), the controller's decisions and timers (controller/), the topics and their
partitions (topics.py, partition/), replication, the coordinators. BrokerServer builds them and
wires them together (this is the only place that knows them all), binds the listeners, and runs
start-up and shutdown in the order they depend on each other.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.scram import ScramCredential, ScramMechanism
from storage.fs import OS_FS, FileSystem, mkdir_durable

from .admission import Admission
from .apis import CLIENT_APIS, CONTROLLER_APIS
from .config import BrokerConfig, ConfigError, parse_host_port
from .connection import Connection, ConnectionRegistry
from .context import BrokerContext, ControllerContext
from .controller import timers
from .controller.client import ControllerClient
from .controller.quorum_controller import QuorumController
from .controller.recovery import UncleanRecovery
from .controller.shell import ControllerShell
from .fetch_session import FetchSessionCache
from .forwarding import ControllerForwarder
from .group import GroupCoordinator
from .housekeeping import Housekeeper
from .lifecycle import BrokerLifecycle, mark_clean_shutdown, take_clean_shutdown_epoch
from .loop_watch import LoopWatch
from .metadata.publisher import MetadataPublisher
from .metrics import BrokerMetrics
from .metrics_http import MetricsEndpoint
from .metrics_render import render
from .producer_ids import ProducerIdAllocator, legacy_producer_id_floor
from .propagation import Propagation
from .quorum.shell import METADATA_DIR, QuorumShell
from .replication.fetcher import ReplicaFetcher
from .replication.manager import ReplicaManager
from .security.authorizer import Authorizer, AuthorizerSettings, parse_super_users
from .security.listeners import PROTOCOL_IDS, ListenerSpec
from .security.sasl import SaslAuthenticator
from .security.session import ListenerSecurity
from .security.settings import check as check_security
from .security.settings import enabled_mechanisms, plain_users, super_users, wire_security
from .security.tls import server_context
from .share.coordinator import ShareCoordinator
from .share.manager import SharePartitions
from .share.persister import CoordinatorPersister
from .throttle import throttled
from .topics import TopicTable
from .txn.coordinator import TransactionCoordinator

log = structlog.get_logger()


WRITE_PROBE = ".ketch-write-probe"  # created and removed at start: can the broker write there?
UNFENCE_LOG_S = 5.0  # how often a broker waiting to be unfenced says so


class BrokerServer:
    """One broker node: its parts, wired together, and their start and stop."""

    def __init__(self, cfg: BrokerConfig, clock: Clock = SYSTEM_CLOCK, fs: FileSystem = OS_FS) -> None:
        self.cfg = cfg
        self.listener_plan = check_security(cfg)
        # how this broker reaches the other brokers' inter-broker listener, and the voters' controller one
        ib_security = wire_security(cfg, self.listener_plan.inter_broker, controller=False)
        controller_security = wire_security(cfg, self.listener_plan.controller, controller=True)
        self.clock = clock
        self.fs = fs  # the partition logs', the metadata log's and the shutdown marker's files
        self.metrics = BrokerMetrics()
        self.loop_watch = LoopWatch(self.metrics, clock=clock)
        self.topics = TopicTable(cfg, clock, fs)
        self.topics.on_metadata_dir_failure = self._metadata_dir_failed
        self.metadata = MetadataPublisher()
        self.controller = QuorumController(legacy_producer_id_floor(Path(cfg.metadata_dir)),
                                           cfg.broker_session_timeout_ms, cfg.min_insync_replicas, self.metadata)
        self.metadata.on_restore = self.controller.reset
        self.quorum = QuorumShell(cfg.node_id, cfg.voter_map(), Path(cfg.metadata_dir) / METADATA_DIR, cfg.cluster_id,
                                  on_commit=self.metadata.on_commit, on_restore=self.metadata.on_snapshot,
                                  snapshot_every=cfg.metadata_snapshot_records,
                                  snapshot_state=lambda: self.metadata.image.to_snapshot(), fs=fs, clock=clock,
                                  security=controller_security)
        self.quorum.on_role_change = lambda role: self.controller.reset()
        self.controller_shell = ControllerShell(self.quorum, self.controller)
        self.topics.writer = self.controller_client = ControllerClient(cfg.node_id, self.controller_shell,
                                                                       self.quorum.leader_address,
                                                                       controller_security)
        self.producer_ids = ProducerIdAllocator(cfg.node_id, self.quorum.leader_address, lambda: self.lifecycle.epoch,
                                                controller_security)
        self.lifecycle = BrokerLifecycle(cfg.node_id, cfg.cluster_id, self._listeners, cfg.rack,
                                         self.quorum.leader_address, lambda: self.metadata.image.offset,
                                         cfg.broker_heartbeat_interval_ms / 1000, cfg.broker_session_timeout_ms / 1000,
                                         clock=clock, online_dirs=lambda: self.topics.log_dirs.online_ids,
                                         offline_dirs=lambda: self.topics.log_dirs.offline_ids,
                                         assignments=self.topics.dir_assignments, security=controller_security)
        self.topics.on_log_dir_failure = self.lifecycle.wake
        fetcher = ReplicaFetcher(cfg.node_id, self._broker_address, self._topic_id,
                                 throttled=lambda p: throttled(self.topics.image, cfg.node_id, p.topic, p.index),
                                 throttled_rate=cfg.follower_replication_throttled_rate,
                                 broker_epoch=lambda: self.lifecycle.epoch, clock=clock, security=ib_security)
        self.replication = ReplicaManager(
            self.topics, fetcher, lambda p, change: self.controller_client.alter_partition(p, change, self.lifecycle.epoch),
            cfg.replica_lag_time_max_ms)
        self.groups = GroupCoordinator(cfg, self.topics, clock, self.lifecycle.lease_held)
        self.txn = TransactionCoordinator(cfg, self.topics, self.producer_ids, self.metrics, clock,
                                          self._broker_address, ib_security)
        self.metadata.subscribe(self.topics.apply_image)  # partitions, and with them the coordinators
        self.metadata.subscribe(lambda image: self.txn.sender.poke())  # markers waiting for a leader or an address
        self.propagation = Propagation(cfg.node_id, lambda: self.topics.image, self._broker_address, clock,
                                       self._leads_here, ib_security)
        self.forwarder = ControllerForwarder(cfg.node_id, self.quorum, controller_security)
        self.recovery = UncleanRecovery(cfg.node_id, self.controller, self.controller_shell, self._broker_address,
                                        clock, ib_security)
        self.share_coordinator = ShareCoordinator(cfg, self.topics, clock)
        self.share_persister = CoordinatorPersister(self.share_coordinator, self._leader_of, self._broker_address,
                                                    cfg.node_id, clock)
        self.shares = SharePartitions(cfg, self.topics, clock, self.share_persister)
        self.ctx = BrokerContext(cfg.node_id, cfg, clock, self.topics, self.groups, self.txn, self.producer_ids,
                                 self.metrics, self.quorum, self.replication, self.controller_client, self.propagation,
                                 self.forwarder, FetchSessionCache(cfg.max_incremental_fetch_session_cache_slots),
                                 lambda: self.lifecycle.epoch,
                                 Authorizer(AuthorizerSettings(cfg.authorizer, parse_super_users(cfg.super_users),
                                                               cfg.allow_everyone_if_no_acl_found),
                                            lambda: self.metadata.image.acls),
                                 self.shares, self.share_coordinator)
        self.controller_ctx = ControllerContext(cfg.node_id, cfg, clock, self.topics, self.quorum, self.controller,
                                                self.controller_shell)
        self.connections = ConnectionRegistry(self.metrics, cfg.socket_request_max_bytes, cfg.max_pipelined_requests,
                                              self.ctx.fetch_sessions.close_owner,
                                              admission=Admission(cfg.front_door()), clock=clock)
        self._metrics_endpoint: MetricsEndpoint | None = None
        self._client_servers: list[asyncio.Server] = []
        self.client_endpoints: dict[str, tuple[str, int]] = {}  # advertised, by listener name, once bound
        self._tls: ssl.SSLContext | None = None  # the TLS listeners' context, made when the first binds
        self._inter_broker_server: asyncio.Server | None = None
        self._controller_server: asyncio.Server | None = None
        self.controller_endpoint: tuple[str, int] = ("127.0.0.1", 0)  # known once bound
        self.inter_broker_endpoint: tuple[str, int] | None = None  # known once bound
        self.housekeeper = Housekeeper(self.topics, clock, cfg.log_retention_check_interval_ms,
                                       cfg.log_checkpoint_interval_ms, cfg.producer_id_expiration_check_interval_ms,
                                       io_of=self.topics.io_of)
        self._retention_task: asyncio.Task[None] | None = None
        self._idle_sweep: asyncio.Task[None] | None = None
        self._orphan_sweep: asyncio.Task[None] | None = None
        self._controller_task: asyncio.Task[None] | None = None
        self.started_ms = clock.now_ms()

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
        b = self.metadata.image.broker(node)
        if b is None or b.fenced:
            return None
        address = b.address_for(self.listener_plan.inter_broker.name, True)
        return address if address is not None and address[1] else None

    def _leads_here(self, topic: str, index: int) -> bool:
        part = self.topics.partition(topic, index)
        return part is not None and part.is_leader

    def _leader_of(self, topic: str, index: int) -> int:
        """The leader of a partition as the metadata image names it, -1 if none."""
        info = self.topics.image.topics.get(topic)
        return info.partitions[index].leader if info is not None and index < len(info.partitions) else -1

    def _topic_id(self, name: str) -> uuid.UUID:
        t = self.topics.image.topics.get(name)
        return t.topic_id if t is not None else uuid.UUID(int=0)

    async def start(self) -> None:
        self.loop_watch.start()  # start-up (log recovery, metadata replay) is where stalls were seen
        await self._bind()
        self._idle_sweep = asyncio.get_running_loop().create_task(self.connections.close_idle_forever())
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
        await self.topics.settled()  # the logs the image names open on their I/O threads; the coordinators load them
        await self.groups.start()  # loads __consumer_offsets in the background
        self.share_coordinator.start()  # loads __share_group_state in the background
        self.txn.load()  # rebuilt from __transaction_state before any request can reach it
        if self._metrics_endpoint:  # serving before the Kafka port: ready means both
            await self._metrics_endpoint.start()
        assert self._client_servers and self._inter_broker_server is not None
        await self._inter_broker_server.start_serving()  # the marker sender talks to it
        assert self._controller_server is not None
        await self._controller_server.start_serving()
        self.lifecycle.previous_epoch = take_clean_shutdown_epoch(self.fs, Path(self.cfg.metadata_dir))
        self.lifecycle.start()
        self.replication.start()
        self._controller_task = asyncio.get_running_loop().create_task(
            timers.run(self.controller_shell, self.clock, self.cfg.leader_imbalance_check_interval_ms,
                       self.recovery.poke))
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
        for srv in self._client_servers:
            await srv.start_serving()
        loop = asyncio.get_running_loop()
        self._retention_task = loop.create_task(self.housekeeper.run())
        await self.txn.start()  # marker sender (talks to our own listener) and reaper
        self.shares.start()
        host, port = self.client_endpoints[self.listener_plan.clients[0].name]
        ib_host, ib_port = self._inter_broker_advertised()
        log.info("broker started", node_id=self.cfg.node_id, advertise=f"{host}:{port}",
                 listeners=[f"{s.name}://{s.host}:{s.port} ({s.protocol})" for s in self.listener_plan.all],
                 inter_broker=f"{ib_host}:{ib_port}",
                 log_dirs=[str(d.path) for d in self.topics.log_dirs.dirs],
                 metrics=self.cfg.metrics_listen or None)

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
        cfg = self.cfg
        plan = self.listener_plan
        setting, value = ("listeners", cfg.listeners) if cfg.listeners else ("listen", cfg.listen)
        for spec in plan.clients:
            security = self._listener_security(spec)
            srv = await self._listen(setting, value, spec,
                                     lambda spec=spec, security=security: Connection(  # type: ignore[misc]
                                         self.ctx, CLIENT_APIS, self.connections, self.client_endpoints[spec.name],
                                         security=security))
            self._client_servers.append(srv)
            port = srv.sockets[0].getsockname()[1]
            host = spec.host if spec.host not in ("0.0.0.0", "::", "") else "localhost"
            self.client_endpoints[spec.name] = spec.advertised or (host, port)
        ib = plan.inter_broker
        ib_security = self._listener_security(ib)
        self._inter_broker_server = await self._listen(
            *(("listeners", cfg.listeners) if cfg.listeners else ("inter_broker_listen", cfg.inter_broker_listen)), ib,
            lambda: Connection(self.ctx, CLIENT_APIS, self.connections, self._inter_broker_advertised(), True,
                               security=ib_security))
        bound = self._inter_broker_server.sockets[0].getsockname()
        self.inter_broker_endpoint = ("127.0.0.1" if ib.host in ("0.0.0.0", "", "::") else ib.host), bound[1]
        await self._bind_controller()
        if self.cfg.metrics_listen:
            m_host, m_port = parse_host_port("metrics_listen", self.cfg.metrics_listen)
            self._metrics_endpoint = MetricsEndpoint(
                lambda: render(self.ctx, len(self.connections), self.started_ms), m_host or "0.0.0.0", m_port)
            try:
                await self._metrics_endpoint.bind()
            except OSError as e:
                self._close_listeners()
                raise ConfigError("metrics_listen", self.cfg.metrics_listen,
                                  f"cannot listen there: {e.strerror or e}") from None

    async def _bind_controller(self) -> None:
        """The controller listener: this node's place in the metadata quorum. With `voters` it is
        the address the voters name for this node; alone, `controller_listen` (any free port).
        Secured, it serves only brokers (super_users) what brokers ask (broker/security/session.py)."""
        cfg = self.cfg
        voters = cfg.voter_map()
        spec = self.listener_plan.controller
        setting, value = ("voters", cfg.voters) if voters else ("controller_listen", cfg.controller_listen)
        security = self._listener_security(spec, brokers_only=True)
        self._controller_server = await self._listen(
            setting, value, spec,
            lambda: Connection(self.controller_ctx, CONTROLLER_APIS, self.connections, self.controller_endpoint,
                               protected=True, security=security),
            " (controller listener)")
        bound = self._controller_server.sockets[0].getsockname()
        self.controller_endpoint = ("127.0.0.1" if spec.host in ("0.0.0.0", "", "::") else spec.host), bound[1]
        if not voters:
            self.quorum.voters = {cfg.node_id: self.controller_endpoint}

    def _listener_security(self, spec: ListenerSpec, brokers_only: bool = False) -> ListenerSecurity:
        """What a listener's connections need to authenticate (docs/security.md)."""
        cfg = self.cfg
        authenticator = None
        if spec.sasl:
            mechanisms, users = enabled_mechanisms(cfg), plain_users(cfg)
            authenticator = lambda: SaslAuthenticator(mechanisms, users, self._scram_credential)  # noqa: E731
        return ListenerSecurity(spec, authenticator, super_users(cfg),
                                cfg.connection_failed_authentication_delay_ms / 1000, brokers_only)

    def _scram_credential(self, user: str, mech: ScramMechanism) -> ScramCredential | None:
        """A user's SCRAM credential as this broker's metadata image has it."""
        return self.metadata.image.scram_credential(user, mech.type)

    async def _listen(self, setting: str, value: str, spec: ListenerSpec, connection: Callable[[], Connection],
                      which: str = "") -> asyncio.Server:
        """A listener, bound but not serving yet; a port it cannot take closes the ones bound before."""
        if spec.tls and self._tls is None:
            self._tls = server_context(self.cfg)
        try:
            return await asyncio.get_running_loop().create_server(
                connection, spec.host or "0.0.0.0", spec.port, reuse_address=True, backlog=1024, start_serving=False,
                ssl=self._tls if spec.tls else None)
        except OSError as e:
            self._close_listeners()
            raise ConfigError(setting, value, f"cannot listen there{which}: {e.strerror or e}") from None

    def _close_listeners(self) -> list[asyncio.Server]:
        servers = [srv for srv in (*self._client_servers, self._inter_broker_server, self._controller_server)
                   if srv is not None]
        for srv in servers:
            srv.close()
        return servers

    async def _migrate(self, legacy: list[dict[str, Any]]) -> None:
        """Turn a topics.json (Ketch before the quorum) into metadata records, once: the same
        names, ids, partition counts and configs, every partition led here as before."""
        for t in legacy:
            if t["name"] in self.metadata.image.topics:
                continue
            await self.controller_shell.adopt_topic(t["name"], uuid.UUID(t["id"]), t["partitions"],
                                                    t.get("configs", {}), self.cfg.node_id)
        self.topics.retire_legacy_file()

    def _listeners(self) -> list[tuple[str, str, int, int]]:
        """What this broker registers: its client listeners and its inter-broker one (name, advertised
        host and port, security protocol id)."""
        plan = self.listener_plan
        out = [(s.name, *self.client_endpoints[s.name], PROTOCOL_IDS[s.protocol]) for s in plan.clients]
        return [*out, (plan.inter_broker.name, *self._inter_broker_advertised(), PROTOCOL_IDS[plan.inter_broker.protocol])]

    def _inter_broker_advertised(self) -> tuple[str, int]:
        if self.listener_plan.inter_broker.advertised:
            return self.listener_plan.inter_broker.advertised
        assert self.inter_broker_endpoint is not None
        return self.inter_broker_endpoint

    async def stop(self) -> None:
        if self._retention_task:
            self._retention_task.cancel()
        if self._orphan_sweep:
            self._orphan_sweep.cancel()
        if self._idle_sweep:
            self._idle_sweep.cancel()
        if self._metrics_endpoint:
            await self._metrics_endpoint.stop()
        await self.producer_ids.stop()
        if len(self.metadata.image.live_brokers()) > 1:
            await self.lifecycle.shut_down(timeout=5.0)  # leaderships move to other brokers first
        await self.lifecycle.stop()
        await self.replication.stop()
        self.controller_client.close()
        if self._controller_task:
            self._controller_task.cancel()
        await self.quorum.stop()
        servers = self._close_listeners()
        for c in list(self.connections):
            if c.transport:
                c.transport.close()
        for srv in servers:
            await srv.wait_closed()
        await self.txn.stop()
        self.propagation.close()
        self.recovery.close()
        self.forwarder.close()
        await self.groups.stop()
        await self.shares.stop()
        await self.share_coordinator.stop()
        self.share_persister.close()
        self.topics.close()
        mark_clean_shutdown(self.fs, Path(self.cfg.metadata_dir), self.lifecycle.epoch)  # every log flushed and closed
        self.loop_watch.stop()
        log.info("broker stopped", node_id=self.cfg.node_id)
