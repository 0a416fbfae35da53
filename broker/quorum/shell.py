"""The quorum node's asyncio shell: ticks it, persists its Readies, carries its messages over TCP.

The node (node.py) decides; this only does I/O, in the order the node demands: a Ready is
persisted (QuorumStore, fsynced) before any of its messages leaves, its committed entries are
applied after that, then the node advances; one Ready at a time. The persist runs on an I/O
thread of the quorum's own: an fsync of the metadata log can take seconds on a busy disk, and on
the event loop it stalled every request, lease and heartbeat of the broker (the chaos campaigns
saw three brokers stalled together). Meanwhile the node keeps being ticked and fed messages and
proposals (node.py's contract allows it); what they produce waits for the next Ready, which is
taken once the one in flight is done. A Ready with nothing to write (most: a fetch answered, an
entry committed) is handled on the spot, without a trip to the thread. A persist that fails
stops the node for good (`failed`): it cannot know what reached the disk, so it must not vote
or acknowledge anything again before a restart reloads what did.

Messages become Kafka's KRaft requests on the voters' controller listeners (wire_codec.py). The
node's messages are one-way; Kafka's are request/response. An incoming request is fed to the
node and answered with the node's reply to that sender (a parked fetch waits for it — at most a
tick); an outgoing request's response is fed back to the node as a message from the peer.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.messages.metadata_records import NoOpRecord, frame
from protocol.schema import Message as WireMessage
from storage.fs import OS_FS, FileSystem

from ..wire import BrokerConnection, WireError, WireSecurity
from . import wire_codec as wc
from .lease import lease_holds
from .messages import (
    BeginQuorumEpoch,
    EndQuorumEpoch,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    Snapshot,
    VoteRequest,
    VoteResponse,
)
from .node import QuorumConfig, QuorumNode, Ready, Role
from .store import QuorumStore

log = structlog.get_logger()

METADATA_DIR = "__cluster_metadata-0"  # in the data directory, as Kafka names it
TICK_S = 0.1
REPLY_TIMEOUT_S = 2.0
NOOP = frame(NoOpRecord())


@dataclass(frozen=True, slots=True)
class VoterStatus:
    node_id: int
    log_end_offset: int
    last_fetch_ms: int


class QuorumShell:
    def __init__(self, node_id: int, voters: dict[int, tuple[str, int]], directory: Path, cluster_id: str,
                 on_commit: Callable[[Entry], None] | None = None,
                 on_restore: Callable[[Snapshot], None] | None = None,
                 config: QuorumConfig | None = None, snapshot_every: int = 0,
                 snapshot_state: Callable[[], bytes] | None = None, fs: FileSystem = OS_FS,
                 clock: Clock = SYSTEM_CLOCK, security: WireSecurity | None = None) -> None:
        self._security = security  # the voters' controller listeners' (docs/security.md)
        self.id = node_id
        self.clock = clock
        self.voters = voters
        self.cluster_id = cluster_id
        self.store = QuorumStore(directory, fs)
        self.cfg = config or QuorumConfig(election_timeout_ticks=10, fetch_timeout_ticks=20)
        self.on_commit = on_commit or (lambda e: None)
        self.on_restore = on_restore or (lambda s: None)
        # Every `snapshot_every` applied records the state is snapshotted and the log before it
        # dropped, so a restart replays the snapshot and the tail, not the whole history.
        self.snapshot_every = snapshot_every
        self.snapshot_state = snapshot_state
        self._since_snapshot = 0
        self.replayed = 0  # entries applied since this process started (tests look at it)
        self.node: QuorumNode | None = None
        self._waiting: dict[tuple[int, type], deque[asyncio.Future[Any]]] = {}
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Lock] = {}
        self._tasks: dict[asyncio.Task[Any], None] = {}
        self._ticker: asyncio.Task[None] | None = None
        self._last_fetch_ms: dict[int, int] = {}
        # As leader: (first offset, monotonic time) of each run of entries appended in one go, in
        # order, from the epoch's start; the lease dates a voter's confirmation by them (lease.py).
        self._appended: list[tuple[int, float]] = []
        self._appended_end = 0
        self._appended_epoch = -1
        self._proposals: dict[int, tuple[bytes, asyncio.Future[bool]]] = {}
        self.committed_entries = 0
        self.on_role_change: Callable[[Role], None] = lambda role: None
        self._seen: tuple[Role, int] | None = None  # role and epoch last reported
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ketch-quorum-io")
        self._persisting: asyncio.Future[None] | None = None  # the Ready being written, if any
        self.failed: BaseException | None = None  # a persist failed: the node is stopped
        self._stopped = False

    # ---- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        """Load the durable state and start the node; returns once its first Readies are done,
        so a node alone has become leader and applied the whole metadata log by then."""
        loop = asyncio.get_running_loop()
        persisted = await loop.run_in_executor(self._io, self.store.load)
        if persisted.snapshot is not None:
            self.on_restore(persisted.snapshot)
        self.node = QuorumNode(self.id, frozenset(self.voters), persisted, self.cfg)
        self._drain()
        await self._settle()
        self._ticker = loop.create_task(self._tick_loop())
        log.info("metadata quorum started", node_id=self.id, voters=sorted(self.voters), epoch=persisted.epoch,
                 log_end=self.node.log_end)

    async def stop(self) -> None:
        if self._ticker:
            self._ticker.cancel()
        await self._settle(timeout=REPLY_TIMEOUT_S)
        if self.node is not None and self.node.role == Role.LEADER and len(self.voters) > 1 and self.failed is None:
            # A clean shutdown hands leadership over (EndQuorumEpoch) instead of leaving the
            # voters to notice the silence a fetch timeout later.
            self.node.resign()
            self._drain()
            await self._settle(timeout=REPLY_TIMEOUT_S)
            handover = [t for t in self._tasks if not t.done()]
            if handover:
                await asyncio.wait(handover, timeout=1.0)
            log.info("quorum leadership handed over", epoch=self.node.epoch)
        for t in list(self._tasks):
            t.cancel()
        for c in self._conns.values():
            c.close()
        self._conns.clear()
        self._stopped = True  # no Ready is taken any more: what is left in the node is dropped
        self._io.shutdown(wait=False)  # a write still running finishes before the process exits

    async def _settle(self, timeout: float | None = None) -> None:
        """Wait until no Ready is being written (each write may start the next one)."""
        deadline = None if timeout is None else self.clock.monotonic() + timeout
        while (fut := self._persisting) is not None:
            left = None if deadline is None else deadline - self.clock.monotonic()
            if left is not None and left <= 0:
                log.warning("metadata log write still running", seconds=timeout)
                return
            await asyncio.wait([fut], timeout=left)

    async def _tick_loop(self) -> None:
        while self.failed is None:
            await asyncio.sleep(TICK_S)
            assert self.node is not None
            self.node.tick()
            self._keep_lease()
            self._drain()

    @property
    def _lease_window_s(self) -> float:
        # A voter's ticks are never shorter than TICK_S (a stalled loop only drops ticks), so it
        # keeps its promise at least this long in real time.
        return self.cfg.fetch_timeout_ticks * TICK_S

    def _keep_lease(self) -> None:
        """An idle leader appends a no-op every quarter of the window: the voters' next fetches
        confirm it, and the lease stays fresh without client traffic (KIP-835's NoOpRecord)."""
        node = self.node
        assert node is not None
        if node.role != Role.LEADER or len(self.voters) == 1 or node.epoch != self._appended_epoch:
            return
        if node.log_end > self._appended_end:
            return  # an entry waits for the Ready being written: it renews the lease once it goes out
        last = self._appended[-1][1] if self._appended else float("-inf")
        if self.clock.monotonic() - last >= self._lease_window_s / 4:
            node.propose(NOOP)

    # ---- the node's Readies ------------------------------------------------------------------------
    def _drain(self) -> None:
        """Act on the node's Readies after an input; with a Ready being written, the write's
        completion does it (the input's effects wait in the node for the next Ready)."""
        node = self.node
        assert node is not None
        if self.failed is None and not self._stopped:
            for dst, msg in node.free_messages():  # even while a Ready is being written
                self._route(dst, msg)
            if self._persisting is None:
                self._drain_ready(node)
        if (node.role, node.epoch) != self._seen:
            self._seen = (node.role, node.epoch)
            log.info("quorum role changed", role=node.role.value, epoch=node.epoch, leader=node.leader)
            self._fail_proposals()  # a proposal of a lost leadership may never commit
            self.on_role_change(node.role)

    def _fail_proposals(self) -> None:
        for fut in (f for _, f in self._proposals.values() if not f.done()):
            fut.set_result(False)
        self._proposals.clear()

    def _stamp_appends(self, node: QuorumNode) -> None:
        """Date the entries this leader appended since the last drain, before any message that
        carries them leaves: a voter cannot hold an entry before this time."""
        if node.role != Role.LEADER:
            return
        if self._appended_epoch != node.epoch:
            self._appended, self._appended_epoch = [], node.epoch
            self._appended_end = node.epoch_start_offset
        if node.log_end > self._appended_end:
            self._appended.append((self._appended_end, self.clock.monotonic()))
            self._appended_end = node.log_end

    def _appended_at(self, offset: int) -> float | None:
        i = bisect.bisect_right(self._appended, (offset, float("inf"))) - 1
        return self._appended[i][1] if i >= 0 else None

    def _drain_ready(self, node: QuorumNode) -> None:
        while node.has_ready():
            self._stamp_appends(node)
            ready = node.ready()
            if ready.hard_state is None and ready.truncate_to is None and not ready.entries \
                    and ready.snapshot is None:
                self._act_on(node, ready)  # nothing to make durable
                continue
            fut = asyncio.get_running_loop().run_in_executor(self._io, self.store.persist, ready)
            self._persisting = fut
            fut.add_done_callback(functools.partial(self._persisted, ready=ready))
            return

    def _persisted(self, fut: asyncio.Future[None], *, ready: Ready) -> None:
        """On the loop, once the I/O thread is done with `ready`."""
        self._persisting = None
        node = self.node
        assert node is not None
        error = fut.exception() if not fut.cancelled() else RuntimeError("metadata log write cancelled")
        if error is not None:
            self.failed = error
            log.critical("metadata log write failed: this node stops taking part in the quorum until it "
                         "restarts", error=repr(error))
            self._fail_proposals()
            for waiters in self._waiting.values():
                for w in waiters:
                    if not w.done():
                        w.set_result(None)
            if self._ticker is not None:
                self._ticker.cancel()
            return
        self._act_on(node, ready)
        self._drain()

    def _act_on(self, node: QuorumNode, ready: Ready) -> None:
        """`ready` is durable: send its messages, apply what it committed, advance."""
        for dst, msg in ready.messages:
            self._route(dst, msg)
        if ready.restore is not None:
            self.on_restore(ready.restore)
        for e in ready.committed:
            self.committed_entries += 1
            self.replayed += 1
            self._since_snapshot += 1
            if e.data:
                self.on_commit(e)
            waiting = self._proposals.pop(e.offset, None)
            if waiting is not None and not waiting[1].done():
                waiting[1].set_result(waiting[0] == e.data)
        node.advance(ready)
        if ready.committed and self.snapshot_every and self.snapshot_state is not None \
                and self._since_snapshot >= self.snapshot_every:
            node.take_snapshot(ready.committed[-1].offset + 1, self.snapshot_state())
            self._since_snapshot = 0

    def _route(self, dst: int, msg: Message) -> None:
        waiters = self._waiting.get((dst, type(msg)))
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(msg)
                return
        if isinstance(msg, VoteRequest | BeginQuorumEpoch | EndQuorumEpoch | FetchRequest | FetchSnapshotRequest):
            task = asyncio.get_running_loop().create_task(self._send(dst, msg))
            self._tasks[task] = None
            task.add_done_callback(lambda done: self._tasks.pop(done, None))
        # a reply nobody waits for any more: dropped (the node copes with lost messages)

    # ---- incoming requests (handlers on the controller listener) -----------------------------------
    async def ask(self, src: int, msg: Message, reply: type) -> Any:
        """Feed `msg` from `src` to the node and wait for its reply of type `reply` (None on timeout)."""
        node = self.node
        if node is None or self.failed is not None:
            return None
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault((src, reply), deque()).append(fut)
        if isinstance(msg, FetchRequest):
            self._last_fetch_ms[src] = self.clock.now_ms()  # DescribeQuorum shows it: wall time
        node.receive(src, msg)
        self._drain()
        try:
            return await asyncio.wait_for(fut, REPLY_TIMEOUT_S)
        except TimeoutError:
            return None

    def tell(self, src: int, msg: Message) -> None:
        if self.node is None or self.failed is not None:
            return
        self.node.receive(src, msg)
        self._drain()

    # ---- outgoing requests ---------------------------------------------------------------------------
    async def _conn(self, dst: int) -> BrokerConnection:
        conn = self._conns.get(dst)
        if conn is not None and not conn.closed:
            return conn
        lock = self._connecting.setdefault(dst, asyncio.Lock())
        async with lock:
            conn = self._conns.get(dst)
            if conn is None or conn.closed:
                host, port = self.voters[dst]
                conn = await BrokerConnection.connect(host, port, client_id=f"ketch-quorum-{self.id}", timeout=1.0,
                                                      security=self._security)
                self._conns[dst] = conn
            return conn

    async def _send(self, dst: int, msg: Message) -> None:
        try:
            conn = await self._conn(dst)
            wire: WireMessage
            if isinstance(msg, VoteRequest):
                wire = wc.vote_request_to_wire(msg, self.cluster_id, dst)
                resp = await conn.request(wire, timeout=REPLY_TIMEOUT_S)
                back: Message | None = wc.vote_response_from_wire(resp, msg.pre_vote)
            elif isinstance(msg, BeginQuorumEpoch):
                await conn.request(wc.begin_epoch_to_wire(msg, self.cluster_id, dst), timeout=REPLY_TIMEOUT_S)
                back = None
            elif isinstance(msg, EndQuorumEpoch):
                await conn.request(wc.end_epoch_to_wire(msg, self.cluster_id), timeout=REPLY_TIMEOUT_S)
                back = None
            elif isinstance(msg, FetchRequest):
                resp = await conn.request(wc.fetch_request_to_wire(msg, self.cluster_id),
                                          timeout=REPLY_TIMEOUT_S + wc.FETCH_MAX_WAIT_MS / 1000)
                back = wc.fetch_response_from_wire(resp, msg.fetch_offset)
            else:
                assert isinstance(msg, FetchSnapshotRequest)
                resp = await conn.request(wc.fetch_snapshot_request_to_wire(msg, self.cluster_id),
                                          timeout=REPLY_TIMEOUT_S)
                back = wc.fetch_snapshot_response_from_wire(resp)
        except (WireError, OSError, ConnectionError, wc.WireFormatError, ValueError) as e:
            stale = self._conns.pop(dst, None)
            if stale is not None:
                stale.close()
            log.debug("quorum request failed", to=dst, message=type(msg).__name__, error=str(e))
            return
        if back is not None and self.node is not None and self.failed is None:
            self.node.receive(dst, back)
            self._drain()

    # ---- proposals (the active controller) -----------------------------------------------------------
    @property
    def serving(self) -> bool:
        return self.node is not None and self.node.serving and self.failed is None

    def leader_confirmed(self) -> bool:
        """Leading, and holding the lease (lease.py): no other controller can have been elected.
        Measured on the loop's monotonic clock, not in ticks: a node whose loop stalled (or that
        was paused) counts the time it missed."""
        node = self.node
        if node is None or node.role != Role.LEADER or node.epoch != self._appended_epoch or self.failed is not None:
            return False
        now, window = self.clock.monotonic(), self._lease_window_s
        while len(self._appended) > 1 and now - self._appended[1][1] >= window:
            del self._appended[0]  # dates no confirmation inside the window can need
        confirmed = {v: self._appended_at(o) for v, o in node.lease_confirmations().items()}
        return lease_holds(now, window, self.id, self.voters, confirmed)

    def leader_address(self) -> tuple[str, int] | None:
        node = self.node
        if node is None or node.leader is None:
            return None
        return self.voters.get(node.leader)

    async def propose(self, data: bytes, timeout: float = 5.0) -> bool:
        """Append `data` to the metadata log; True once it is committed, False if this node
        stopped leading before that (the entry may be lost) or the timeout passed."""
        node = self.node
        if node is None or not self.serving:
            return False
        offset = node.propose(data)
        if offset is None:
            return False
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._proposals[offset] = (data, fut)
        self._drain()
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            self._proposals.pop(offset, None)
            return False

    # ---- what DescribeQuorum and `ketch cluster describe` show ---------------------------------------
    def status(self) -> tuple[int, int, int, list[VoterStatus]]:
        """(leader id or -1, epoch, high watermark, voters with their log end as this node knows it)."""
        node = self.node
        assert node is not None
        lead = node._lead  # noqa: SLF001 - the leader's own view of its followers
        now = self.clock.now_ms()
        voters = []
        for v in sorted(self.voters):
            if v == self.id:
                voters.append(VoterStatus(v, node.log_end, now))
            elif node.role == Role.LEADER and lead is not None:
                voters.append(VoterStatus(v, lead.match.get(v, 0), self._last_fetch_ms.get(v, -1)))
            else:
                voters.append(VoterStatus(v, -1, -1))
        return (node.leader if node.leader is not None else -1), node.epoch, node.high_watermark, voters

    def reply_types(self) -> dict[type, type]:
        return {VoteRequest: VoteResponse, FetchRequest: FetchResponse, FetchSnapshotRequest: FetchSnapshotResponse}
