"""Where share-partition state is kept durably.

MemoryPersister keeps it in this process (unit tests, and a broker that has no share coordinator to
talk to); CoordinatorPersister (below) writes it through the share coordinator of the share-partition's
key, on whichever broker leads its `__share_group_state` partition."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from protocol.clock import Clock
from protocol.errors import ErrorCode
from protocol.messages.share_group_state import (
    ReadPartition,
    ReadShareGroupStateRequest,
    ReadTopic,
    StateBatch,
    WritePartition,
    WriteShareGroupStateRequest,
    WriteTopic,
)
from protocol.schema import Message

from ..wire import Channel, WireError
from .coordinator import STATE_TOPIC, ShareCoordinator
from .manager import Key, StoredState
from .partition_state import StateRun

log = structlog.get_logger()


class MemoryPersister:
    def __init__(self) -> None:
        self.states: dict[Key, StoredState] = {}

    async def read(self, key: Key, leader_epoch: int) -> tuple[ErrorCode, StoredState | None]:
        return ErrorCode.NONE, self.states.get(key)

    async def write(self, key: Key, leader_epoch: int, state: StoredState) -> ErrorCode:
        self.states[key] = state
        return ErrorCode.NONE


RETRIABLE = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
             ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT)


class CoordinatorPersister:
    """Reads and writes share-partition state through the share coordinator of its key, over the
    inter-broker listener — also when that coordinator is this broker, as the marker sender does,
    so one broker takes the path a cluster takes. A coordinator that moves, loads or is not there
    yet is asked again until `timeout_s` has passed."""

    def __init__(self, coordinator: ShareCoordinator, leader_of: Callable[[str, int], int],
                 address_of: Callable[[int], tuple[str, int] | None], node_id: int, clock: Clock,
                 timeout_s: float = 15.0, backoff_s: float = 0.1) -> None:
        self._coordinator = coordinator  # placement (partition_for) and topic creation only
        self._leader_of = leader_of
        self._channel = Channel(address_of, f"ketch-share-state-{node_id}")
        self._clock = clock
        self._timeout_s = timeout_s
        self._backoff_s = backoff_s

    def close(self) -> None:
        self._channel.close()

    async def _ask(self, key: Key, request: Message) -> tuple[ErrorCode, Any]:
        deadline = self._clock.monotonic() + self._timeout_s
        err = ErrorCode.COORDINATOR_NOT_AVAILABLE
        while True:
            await self._coordinator.ensure_topic()
            leader = self._leader_of(STATE_TOPIC, self._coordinator.partition_for(key))
            if leader >= 0:
                try:
                    conn = await self._channel.connection(leader)
                    resp = await conn.request(request, timeout=self._timeout_s)
                    part = resp.results[0].partitions[0]
                    err = ErrorCode(part.error_code)
                    if err not in RETRIABLE:
                        return err, part
                except (WireError, OSError, IndexError) as e:
                    log.info("share coordinator unreachable; retrying", leader=leader, error=str(e))
                    err = ErrorCode.COORDINATOR_NOT_AVAILABLE
            if self._clock.monotonic() >= deadline:
                return err, None
            await asyncio.sleep(self._backoff_s)

    async def read(self, key: Key, leader_epoch: int) -> tuple[ErrorCode, StoredState | None]:
        err, part = await self._ask(key, ReadShareGroupStateRequest(group_id=key[0], topics=[
            ReadTopic(topic_id=key[1], partitions=[ReadPartition(partition=key[2], leader_epoch=leader_epoch)])]))
        if err or part is None:
            return err or ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if part.start_offset < 0:
            return ErrorCode.NONE, None  # never initialized
        return ErrorCode.NONE, StoredState(part.state_epoch, part.start_offset, tuple(
            StateRun(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in part.state_batches))

    async def write(self, key: Key, leader_epoch: int, state: StoredState) -> ErrorCode:
        err, _ = await self._ask(key, WriteShareGroupStateRequest(group_id=key[0], topics=[WriteTopic(
            topic_id=key[1], partitions=[WritePartition(
                partition=key[2], state_epoch=state.state_epoch, leader_epoch=leader_epoch,
                start_offset=state.start_offset,
                state_batches=[StateBatch(first_offset=r.first, last_offset=r.last, delivery_state=r.state,
                                          delivery_count=r.delivery_count) for r in state.runs])])]))
        return err
