"""Where share-partition state is kept durably.

MemoryPersister keeps it in this process (unit tests, and a broker that has no share coordinator to
talk to); CoordinatorPersister (below) writes it through the share coordinator of the share-partition's
key, on whichever broker leads its `__share_group_state` partition."""

from __future__ import annotations

from protocol.errors import ErrorCode

from .manager import Key, StoredState


class MemoryPersister:
    def __init__(self) -> None:
        self.states: dict[Key, StoredState] = {}

    async def read(self, key: Key, leader_epoch: int) -> tuple[ErrorCode, StoredState | None]:
        return ErrorCode.NONE, self.states.get(key)

    async def write(self, key: Key, leader_epoch: int, state: StoredState) -> ErrorCode:
        self.states[key] = state
        return ErrorCode.NONE
