"""The marker sender: one background task per broker that delivers WriteTxnMarkers.

It always goes over TCP to the partition's leader, also when that leader is this very broker:
the coordinator and the partition leader are different roles that a cluster puts on different
machines, and taking the same path on one node keeps the single-broker case from hiding bugs
(and from growing a shortcut the cluster would lack). Each destination gets at most one request
in flight; whatever is owed meanwhile goes into its next request, so under load one request
carries the markers of many transactions. Failed requests are retried after a backoff until
every leader has written its marker; then `on_done` is told, and the coordinator writes
CompleteCommit/CompleteAbort. The bookkeeping is markers.MarkerQueue; this is only the I/O.
Retries are timed on the monotonic clock: on the wall clock, a host's clock stepped back an hour
held every retry for an hour (simulation seed 3258).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from protocol.clock import Clock
from protocol.topic_partition import TopicPartition
from storage.faults import crash_point

from ..wire import Channel, WireError, WireSecurity
from .machine import MarkerJob
from .markers import MarkerQueue, MarkerSend, build_request, response_errors

log = structlog.get_logger()

REQUEST_TIMEOUT_S = 30.0


class MarkerSender:
    def __init__(self, node_id: int, leader_of: Callable[[TopicPartition], int],
                 address_of: Callable[[int], tuple[str, int] | None], clock: Clock,
                 on_done: Callable[[list[MarkerJob]], None], *, retry_backoff_ms: int = 100,
                 security: WireSecurity | None = None) -> None:
        self.node_id = node_id
        self.queue = MarkerQueue(retry_backoff_ms)
        self._leader_of = leader_of  # the partition's leader, DELETED once its topic is gone
        self._clock = clock
        self._on_done = on_done
        self._wake = asyncio.Event()
        self._channel = Channel(address_of, f"ketch-txn-markers-{node_id}", security)  # markers' own connections
        self._busy: set[int] = set()
        self._tasks: dict[asyncio.Task[None], None] = {}
        self._loop_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._loop_task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._loop_task:
            self._loop_task.cancel()
        for t in list(self._tasks):
            t.cancel()
        self._channel.close()

    def add(self, job: MarkerJob) -> None:
        self.queue.add(job)
        self._wake.set()

    def drop(self, which: Callable[[MarkerJob], bool]) -> int:
        return self.queue.drop(which)

    def poke(self) -> None:
        """The cluster changed (a new leader, a broker back): look at what is owed again."""
        self._wake.set()

    # ---- the loop ---------------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            self._deliver_done()
            now = self._clock.monotonic_ms()
            for node, sends in self.queue.drain(now, self._leader_of, self._busy).items():
                self._busy.add(node)
                task = asyncio.get_running_loop().create_task(self._send(node, sends))
                self._tasks[task] = None
                task.add_done_callback(lambda done: self._tasks.pop(done, None))
            self._deliver_done()
            retry = self.queue.next_retry_ms()
            timeout = None if retry is None else max(retry - self._clock.monotonic_ms(), 1) / 1000
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                pass
            self._wake.clear()

    async def _send(self, node: int, sends: list[MarkerSend]) -> None:
        try:
            conn = await self._channel.connection(node)
            resp = await conn.request(build_request(sends), timeout=REQUEST_TIMEOUT_S)
        except (WireError, OSError) as e:
            log.warning("WriteTxnMarkers failed, will retry", broker=node, error=str(e), markers=len(sends))
            self.queue.on_failure(sends, self._clock.monotonic_ms())
        else:
            errors = response_errors(resp)
            self.queue.on_response(sends, errors, self._clock.monotonic_ms())
            if any(s.commit and self.queue.pending_partitions(s.key)
                   and any(errors.get((s.producer_id, *tp), -1) == 0 for tp in s.partitions) for s in sends):
                crash_point("markers_half_sent")
        finally:
            self._busy.discard(node)
            self._wake.set()

    def _deliver_done(self) -> None:
        done = self.queue.take_done()
        if done:
            self._on_done(done)
        for job, reason in self.queue.take_abandoned():
            log.warning("transaction markers abandoned; the transaction stays prepared until its coordinator "
                        "reloads", transactional_id=job.transactional_id, producer_id=job.producer_id,
                        producer_epoch=job.producer_epoch, commit=job.commit, error=reason.name)

