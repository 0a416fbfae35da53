"""A broker's life in the cluster: register with the active controller, then heartbeat.

The controller records the registration (the broker starts fenced), unfences the broker once a
heartbeat shows it has applied the metadata log up to its registration, and fences it when the
heartbeats stop for the session timeout. A broker whose epoch the controller no longer knows (a
new registration replaced it, or the controller lost it) registers again. Every call goes to the
quorum leader's controller listener, even when that is this process.

A clean stop (every log flushed and closed) ends with a marker file in the metadata directory holding
the broker epoch it stopped under, as Kafka's `.kafka_cleanshutdown`; the next start takes it away
before registering and gives that epoch back as PreviousBrokerEpoch. Without it (-1: killed, or a
crash) the controller treats the broker's logs as possibly torn (KIP-966): a partition only it
can lead waits for it and it leads again under a new leader epoch.

The registration lists the broker's log directories that are online; each heartbeat names those
that failed since (OfflineLogDirs), and after it the broker tells the controller which directory
holds each replica the committed image does not place yet (AssignReplicasToDirs, KIP-858): with
both the controller moves the ISR places and leaderships of a failed directory's replicas to
other brokers (controller/quorum_controller.py). A directory failing cuts the wait for the next
heartbeat short (`wake`).

Each acknowledged heartbeat also renews a lease: three quarters of the session timeout from when
the heartbeat was sent, so it always ends before the controller can fence the broker and hand its
partitions to another. A broker cut off from the controller (or paused and woken up) cannot know
whether its leaderships were moved; while its lease has lapsed, what it answers from memory as a
partition's leader — a group's committed offsets — would be stale, so it does not answer it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Callable
from pathlib import Path

import structlog

from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.errors import ErrorCode
from protocol.messages import assign_replicas_to_dirs as ard
from protocol.messages.broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from protocol.messages.broker_registration import (
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    Listener,
)
from storage.checkpoint import atomic_write
from storage.fs import FileSystem

from .wire import BrokerConnection, WireError, WireSecurity

log = structlog.get_logger()

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"  # Kafka's name; {"version": 0, "brokerEpoch": N}
# directory id -> topic id -> partitions: replicas whose log directory the controller is to learn
Assignments = dict[uuid.UUID, dict[uuid.UUID, list[int]]]


def take_clean_shutdown_epoch(fs: FileSystem, metadata_dir: Path) -> int:
    """The broker epoch of a clean stop, the marker removed (durably: a crash from here on is
    unclean); -1 if there is none or it cannot be read."""
    path = metadata_dir / CLEAN_SHUTDOWN_FILE
    try:
        raw = json.loads(fs.read(path))
        epoch = int(raw["brokerEpoch"])
    except FileNotFoundError:
        return -1
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("clean-shutdown marker unreadable: treating the last stop as unclean", error=str(e))
        epoch = -1
    fs.unlink(path)
    fs.fsync_dir(metadata_dir)
    return epoch


def mark_clean_shutdown(fs: FileSystem, metadata_dir: Path, broker_epoch: int | None) -> None:
    """Every log is flushed and closed: the next start may say so to the controller."""
    if broker_epoch is not None:
        atomic_write(fs, metadata_dir / CLEAN_SHUTDOWN_FILE, json.dumps({"version": 0, "brokerEpoch": broker_epoch}).encode())


class BrokerLifecycle:
    def __init__(self, node_id: int, cluster_id: str, listeners: Callable[[], list[tuple[str, str, int, int]]],
                 rack: str | None, controller: Callable[[], tuple[str, int] | None],
                 metadata_offset: Callable[[], int], heartbeat_interval_s: float,
                 session_timeout_s: float, previous_epoch: int = -1, clock: Clock = SYSTEM_CLOCK,
                 online_dirs: Callable[[], list[uuid.UUID]] = list, offline_dirs: Callable[[], list[uuid.UUID]] = list,
                 assignments: Callable[[], Assignments] = dict, security: WireSecurity | None = None) -> None:
        self._security = security  # the controller listener's
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.incarnation = uuid.uuid4()  # a new one per process: the controller tells restarts apart
        self._listeners = listeners
        self.rack = rack
        self._controller = controller
        self._offset = metadata_offset
        # at least four heartbeats a session, so that a lease outlasts two lost or slow ones
        self.interval = min(heartbeat_interval_s, session_timeout_s / 4)
        self.lease_s = 0.75 * session_timeout_s
        self.clock = clock
        self._lease_from: float | None = None  # monotonic time the last acknowledged heartbeat was sent
        self.epoch: int | None = None
        self.previous_epoch = previous_epoch  # of a clean stop, given back at the first registration
        self.fenced = True
        self._conn: BrokerConnection | None = None
        self._conn_to: tuple[str, int] | None = None
        self._online_dirs = online_dirs
        self._offline_dirs = offline_dirs
        self._assignments = assignments
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self.registered = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
        if self._conn:
            self._conn.close()

    async def _run(self) -> None:
        while True:
            registered_now = False
            try:
                registered_now = await self._step()
            except (WireError, OSError, ConnectionError) as e:
                log.debug("controller unreachable", error=str(e))
                if self._conn:
                    self._conn.close()
                self._conn = None
            if not registered_now:  # a new registration heartbeats at once: unfenced sooner
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.interval)
            self._wake.clear()

    def wake(self) -> None:
        """Heartbeat now, not at the next interval (a log directory failed: the controller is to know)."""
        self._wake.set()

    async def shut_down(self, timeout: float) -> None:
        """Controlled shutdown: heartbeat with WantShutDown until the controller has moved every
        leadership away and says the broker may stop (or `timeout` passes)."""
        if self._task:
            self._task.cancel()
        if self.epoch is None:
            return
        deadline = self.clock.monotonic() + timeout
        while self.clock.monotonic() < deadline:
            try:
                conn = await self._connection()
                if conn is not None:
                    resp = await conn.request(BrokerHeartbeatRequest(
                        broker_id=self.node_id, broker_epoch=self.epoch, current_metadata_offset=self._offset(),
                        want_shut_down=True), timeout=2.0)
                    if resp.error_code == 0 and resp.should_shut_down:
                        log.info("controlled shutdown: leaderships moved away")
                        return
            except (WireError, OSError, ConnectionError) as e:
                log.debug("controller unreachable during shutdown", error=str(e))
                self._conn = None
            await asyncio.sleep(0.2)
        log.warning("controlled shutdown not confirmed by the controller in time; stopping anyway")

    def lease_held(self) -> bool:
        """Whether the controller has certainly not fenced this broker yet (see the module doc)."""
        return self._lease_from is not None and self.clock.monotonic() - self._lease_from < self.lease_s

    async def _connection(self) -> BrokerConnection | None:
        address = self._controller()
        if address is None:
            return None
        if self._conn is None or self._conn.closed or self._conn_to != address:
            if self._conn:
                self._conn.close()
            self._conn = await BrokerConnection.connect(*address, client_id=f"ketch-broker-{self.node_id}", timeout=2.0,
                                                        security=self._security)
            self._conn_to = address
        return self._conn

    async def _step(self) -> bool:
        """One registration or heartbeat; True if the broker has just registered."""
        conn = await self._connection()
        if conn is None:
            return False
        sent = self.clock.monotonic()
        if self.epoch is None:
            resp = await conn.request(BrokerRegistrationRequest(
                broker_id=self.node_id, cluster_id=self.cluster_id, incarnation_id=self.incarnation,
                listeners=[Listener(name=n, host=h, port=p, security_protocol=sp) for n, h, p, sp in self._listeners()],
                rack=self.rack, previous_broker_epoch=self.previous_epoch, log_dirs=self._online_dirs()), timeout=10.0)
            assert isinstance(resp, BrokerRegistrationResponse)
            if resp.error_code == 0:
                self.epoch = resp.broker_epoch  # fenced until caught up: no lease yet
                log.info("broker registered", broker_epoch=self.epoch)
                return True
            return False
        resp = await conn.request(BrokerHeartbeatRequest(
            broker_id=self.node_id, broker_epoch=self.epoch, current_metadata_offset=self._offset(),
            offline_log_dirs=self._offline_dirs()), timeout=10.0)
        assert isinstance(resp, BrokerHeartbeatResponse)
        if resp.error_code in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
            self.previous_epoch, self.epoch = self.epoch, None  # register again: same process, logs as they were
            self._lease_from = None
        elif resp.error_code == 0:
            # a fenced broker holds nothing: its leaderships may be another's already
            self._lease_from = None if resp.is_fenced else sent
            if self.fenced != resp.is_fenced:
                log.info("broker fenced" if resp.is_fenced else "broker unfenced", broker_epoch=self.epoch)
            self.fenced = resp.is_fenced
            if not resp.is_fenced:
                self.registered.set()
            await self._assign(conn, self.epoch)
        return False

    async def _assign(self, conn: BrokerConnection, epoch: int) -> None:
        """Tell the controller the log directory of each replica it does not place yet. Sent again
        at the next heartbeat while the committed image does not show it (or the answer is lost)."""
        due = self._assignments()
        if not due:
            return
        resp = await conn.request(ard.AssignReplicasToDirsRequest(
            broker_id=self.node_id, broker_epoch=epoch, directories=[ard.DirectoryData(id=d, topics=[
                ard.TopicData(topic_id=t, partitions=[ard.PartitionData(partition_index=i) for i in parts])
                for t, parts in topics.items()]) for d, topics in due.items()]), timeout=10.0)
        assert isinstance(resp, ard.AssignReplicasToDirsResponse)
        refused = [(t.topic_id, p.partition_index, p.error_code) for d in resp.directories for t in d.topics
                   for p in t.partitions if p.error_code]
        if resp.error_code or refused:
            log.debug("log directory assignments refused", error=resp.error_code, partitions=refused[:10])
