"""Producer ids, handed out in blocks that the metadata quorum records (KIP-730's scheme).

A block is a broker's once the active controller's ProducerIdsRecord for it is committed in the
metadata log, so no two brokers — and no broker before and after a crash — ever hand out the same
id (the seeds' ZooKeeper block scheme, done through the quorum). The broker asks for the next
block (AllocateProducerIds, on the controller listener of the quorum leader — even when that is
itself: one path) when a tenth of the current one is left, in its registration's broker epoch
(none is asked for before the broker is registered). Should both run out before an answer
comes, InitProducerId gets COORDINATOR_LOAD_IN_PROGRESS, which clients retry — as Kafka does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import structlog

from protocol.errors import ErrorCode, KafkaError
from protocol.messages.allocate_producer_ids import AllocateProducerIdsRequest, AllocateProducerIdsResponse

from .wire import BrokerConnection, WireError, WireSecurity

log = structlog.get_logger()

RETRY_S = 0.2
BLOCK_HINT = 1000  # the controller's block size (broker/controller/quorum_controller.py)


def legacy_producer_id_floor(data_dir: Path) -> int:
    """Where the producer_ids.json of an older Ketch left off (0 if there is none)."""
    path = data_dir / "producer_ids.json"
    try:
        return int(json.loads(path.read_text())["next_block_start"])
    except (OSError, ValueError, KeyError):
        return 0


class ProducerIdAllocator:
    def __init__(self, node_id: int, controller: Callable[[], tuple[str, int] | None],
                 broker_epoch: Callable[[], int | None], security: WireSecurity | None = None) -> None:
        self._security = security  # the controller listener's
        self.node_id = node_id
        self._controller = controller  # the quorum leader's controller listener, when known
        self._broker_epoch = broker_epoch  # this broker's registration (None: not registered yet)
        self._next = 0
        self._end = 0  # the current block is [_next, _end)
        self._spare: tuple[int, int] | None = None  # the next block, already granted
        self._fetching: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    def allocate(self) -> int:
        if self._next >= self._end:
            if self._spare is None:
                self._fetch_soon()
                raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "a block of producer ids is on its way")
            self._next, self._end = self._spare
            self._spare = None
        pid = self._next
        self._next += 1
        if self._spare is None and (self._end - self._next) * 10 <= BLOCK_HINT:
            self._fetch_soon()  # a tenth left: ask for the next block now
        return pid

    async def first_block(self, timeout: float) -> bool:
        """Start fetching and wait (up to `timeout`) for the first block: serving before it would
        only hand out retriable errors."""
        self._fetch_soon()
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
            return True
        except TimeoutError:
            return False

    def _fetch_soon(self) -> None:
        if self._fetching is None or self._fetching.done():
            self._fetching = asyncio.get_running_loop().create_task(self._fetch())

    async def _fetch(self) -> None:
        while True:
            block = await self._ask()
            if block is not None:
                if self._next >= self._end:
                    self._next, self._end = block
                else:
                    self._spare = block
                self._ready.set()
                return
            await asyncio.sleep(RETRY_S)

    async def _ask(self) -> tuple[int, int] | None:
        address, epoch = self._controller(), self._broker_epoch()
        if address is None or epoch is None:
            return None
        try:
            conn = await BrokerConnection.connect(*address, client_id=f"ketch-broker-{self.node_id}", timeout=2.0,
                                                  security=self._security)
        except WireError:
            return None
        try:
            resp = await conn.request(AllocateProducerIdsRequest(broker_id=self.node_id, broker_epoch=epoch),
                                      timeout=10.0)
        except WireError:
            return None
        finally:
            conn.close()
        assert isinstance(resp, AllocateProducerIdsResponse)
        if resp.error_code:
            log.debug("producer-id block refused", error=ErrorCode(resp.error_code).name)
            return None
        return resp.producer_id_start, resp.producer_id_start + resp.producer_id_len

    async def stop(self) -> None:
        if self._fetching is not None:
            self._fetching.cancel()
