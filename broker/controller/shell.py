"""Runs the controller's decisions on the node whose quorum leads, and commits them.

One decision at a time that touches brokers, topics or partitions — registrations, heartbeats,
fencing, topics, AlterPartition, elections, reassignments: each is taken against the committed
image, proposed, and awaited before the next is taken, so no decision is made on a view that an
entry in flight is about to change (AllocateProducerIds keeps its own working view and does not
queue here). A proposal is awaited until it commits or this node stops leading, however long
that takes: with a deadline, the next decision would be taken on an image without an entry that
can still commit after it (the quorum's check-quorum ends a leadership that cannot commit). A
proposal that does not commit resets the controller and answers NOT_CONTROLLER, which every
client and broker retries against the new leader. The image refuses a partition change that does
not follow from the partition it applies to, all the same (metadata/image.py).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from protocol.acl import AclBinding, AclFilter
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition
from storage.faults import broken

from ..quorum.shell import QuorumShell
from . import scram
from .quorum_controller import IsrRequest, QuorumController

R = TypeVar("R")
A = TypeVar("A", bound=tuple[Any, ...])
UNTIL_DECIDED = float("inf")  # a proposal's wait: until it commits or the leadership ends


class ControllerShell:
    def __init__(self, quorum: QuorumShell, controller: QuorumController) -> None:
        self.quorum = quorum
        self.controller = controller
        self._lock = asyncio.Lock()

    @property
    def active(self) -> bool:
        return self.quorum.serving

    async def run(self, decide: Callable[[], tuple[bytes | None, R]]) -> R:
        """`decide()` -> (entry or None, result); the result once the entry has committed.
        KafkaError from `decide` (a refused request) passes through, nothing proposed.

        Shielded: a caller cancelled meanwhile (its client's connection closed) must not release
        the lock while its entry may still commit, or the next decision is taken on an image
        without it (two TopicRecords for one name were committed so)."""
        task = asyncio.ensure_future(self._run(decide))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved, if nobody waits
        return await asyncio.shield(task)

    async def _run(self, decide: Callable[[], tuple[bytes | None, R]]) -> R:
        async with self._lock:
            if not self.quorum.serving:
                raise KafkaError(ErrorCode.NOT_CONTROLLER, "this node is not the active controller")
            entry, result = decide()
            wait = 5.0 if broken("registration-serial") else UNTIL_DECIDED  # (issue 23 item 1: the old 5 s)
            if entry is not None and not await self.quorum.propose(entry, timeout=wait):
                self.controller.reset()
                raise KafkaError(ErrorCode.NOT_CONTROLLER, "controller leadership lost before the change committed")
            return result

    async def answer(self, decide: Callable[[], A]) -> A:
        """For a decision that answers (error, entry or None, ...): that answer, once the entry —
        proposed only without an error — has committed."""
        return await self.run(lambda: (None if (out := decide())[0] else out[1], out))

    async def register_broker(self, broker_id: int, incarnation_id: uuid.UUID,
                              listeners: Sequence[tuple[Any, ...]], rack: str | None, now_ms: int,
                              previous_broker_epoch: int, log_dirs: Sequence[uuid.UUID] = ()) -> int:
        """The new broker epoch, once the registration (and the partition changes it calls for) committed."""
        c = self.controller
        return await self.run(lambda: c.register_broker(broker_id, incarnation_id, listeners, rack, now_ms,
                                                        previous_broker_epoch, log_dirs))

    # ---- the topic changes, as the client listener (forwarded) and this node ask for them ---------
    async def create_topic(self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str],
                           assignments: Sequence[Sequence[int]] | None) -> uuid.UUID:
        c = self.controller
        return await self.run(lambda: c.create_topic(name, partitions, replication_factor, configs, assignments))

    async def create_partitions(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None) -> None:
        c = self.controller
        await self.run(lambda: (c.create_partitions(name, count, assignments), None))

    async def delete_topic(self, name: str) -> uuid.UUID:
        c = self.controller
        return await self.run(lambda: c.delete_topic(name))

    async def set_configs(self, name: str, configs: Mapping[str, str]) -> None:
        c = self.controller
        await self.run(lambda: (c.set_configs(name, configs), None))

    async def adopt_topic(self, name: str, topic_id: uuid.UUID, partitions: int, configs: Mapping[str, str],
                          node: int) -> None:
        c = self.controller
        await self.run(lambda: (c.adopt_topic(name, topic_id, partitions, configs, node), None))

    async def set_broker_configs(self, resource_name: str, configs: Mapping[str, str]) -> None:
        c = self.controller
        await self.run(lambda: (c.set_broker_configs(resource_name, configs), None))

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[tuple[int, str | None]]:
        c = self.controller
        return await self.run(lambda: c.create_acls(bindings))

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[tuple[int, str | None, list[AclBinding]]]:
        c = self.controller
        return await self.run(lambda: c.delete_acls(filters))

    async def alter_scram(self, deletions: Sequence[tuple[str, int]], upsertions: Sequence[scram.Upsertion]
                          ) -> dict[str, tuple[int, str | None]]:
        c = self.controller
        return await self.run(lambda: c.alter_scram(deletions, upsertions))

    async def alter_partitions(self, broker_id: int, broker_epoch: int, changes: Sequence[IsrRequest]) -> list[int]:
        """One AlterPartition request's changes, decided together and committed as one entry."""
        c = self.controller
        return await self.run(lambda: c.alter_partitions(broker_id, broker_epoch, changes))

    async def elect_leaders(self, wanted: Sequence[TopicPartition] | None,
                            unclean: bool) -> dict[TopicPartition, ErrorCode]:
        c = self.controller
        return await self.run(lambda: c.elect_leaders(wanted, unclean))

    async def reassign(self, wanted: Sequence[tuple[str, int, Sequence[int] | None]]
                       ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        c = self.controller
        return await self.run(lambda: c.reassign(wanted))
