"""Recovery elections on the active controller: asking the candidates how far their logs go.

A partition whose ISR and ELR are empty has no replica known to hold every acknowledged record;
its LastKnownElr names those that may (partition_change.py). Once they are all back, the
controller asks each (GetReplicaLogInfo, 93, over its inter-broker listener) for its last leader
epoch and log end, and elects the furthest through the one serialized path, where the decision is
taken again on the image of that moment (QuorumController.recover): an answer from a broker that
has registered again since is not counted, and a partition that found a leader meanwhile is left
alone. A broker that does not answer within ASK_S is asked again on the next pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Mapping, Sequence

import structlog

from protocol.clock import Clock
from protocol.errors import KafkaError
from protocol.messages.get_replica_log_info import (
    MAX_PARTITIONS,
    GetReplicaLogInfoRequest,
    GetReplicaLogInfoResponse,
    TopicPartitions,
)

from ..wire import Channel, WireError, WireSecurity
from .quorum_controller import QuorumController
from .shell import ControllerShell

log = structlog.get_logger()

ASK_S = 2.0  # how long a candidate has to answer, per pass

Key = tuple[uuid.UUID, int]
Answer = tuple[int, dict[Key, tuple[int, int]]]  # (broker epoch, (topic id, partition) -> (last epoch, log end))


class UncleanRecovery:
    def __init__(self, node_id: int, controller: QuorumController, shell: ControllerShell,
                 address_of: Callable[[int], tuple[str, int] | None], clock: Clock,
                 security: WireSecurity | None = None) -> None:
        self._controller = controller
        self._shell = shell
        self._clock = clock
        self._channel = Channel(address_of, f"ketch-recovery-{node_id}", security)
        self._task: asyncio.Task[None] | None = None

    def poke(self) -> None:
        """On the active controller, every pass of its loop: start a round if a partition waits
        for one and none is under way."""
        if self._task is not None and not self._task.done():
            return
        wanted = self._controller.logs_to_inspect()
        if wanted:
            self._task = asyncio.get_running_loop().create_task(self._round(wanted))

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._channel.close()

    async def _round(self, wanted: Mapping[int, Sequence[Key]]) -> None:
        asked = await asyncio.gather(*(self._ask(b, parts) for b, parts in wanted.items()))
        answers = {b: a for b, a in zip(wanted, asked, strict=True) if a is not None}
        unanswered = [b for b in wanted if b not in answers]
        (log.debug if unanswered else log.info)(
            "recovery election: the candidates' log ends", unanswered=unanswered,
            answers={b: {self._name(t, i): v for (t, i), v in a[1].items()} for b, a in answers.items()})
        with contextlib.suppress(KafkaError):  # not the controller any more: the next one asks again
            await self._shell.run(lambda: (self._controller.recover(answers), None))

    def _name(self, topic_id: uuid.UUID, i: int) -> str:
        t = self._controller.image.topic_by_id(topic_id)
        return f"{t.name if t is not None else topic_id}-{i}"

    async def _ask(self, broker: int, parts: Sequence[Key]) -> Answer | None:
        """What `broker` answers for `parts`, in requests of at most MAX_PARTITIONS (a broker
        answers no more at once); None if it does not, or restarted between two of them."""
        deadline = self._clock.monotonic() + ASK_S
        epochs: set[int] = set()
        ends: dict[Key, tuple[int, int]] = {}
        try:
            conn = await asyncio.wait_for(self._channel.connection(broker), ASK_S)
            for first in range(0, len(parts), MAX_PARTITIONS):
                by_topic: dict[uuid.UUID, list[int]] = {}
                for topic_id, i in parts[first:first + MAX_PARTITIONS]:
                    by_topic.setdefault(topic_id, []).append(i)
                request = GetReplicaLogInfoRequest(topic_partitions=[TopicPartitions(topic_id=t, partitions=ps)
                                                                     for t, ps in by_topic.items()])
                resp = await conn.request(request, timeout=max(deadline - self._clock.monotonic(), 0.001))
                assert isinstance(resp, GetReplicaLogInfoResponse)
                epochs.add(resp.broker_epoch)
                ends.update({(t.topic_id, p.partition): (p.last_written_leader_epoch, p.log_end_offset)
                             for t in resp.topic_partition_log_info_list
                             for p in t.partition_log_info if p.error_code == 0})
        except (WireError, OSError, TimeoutError) as e:
            log.debug("recovery election: a candidate did not answer", broker=broker, error=str(e))
            return None
        return (epochs.pop(), ends) if len(epochs) == 1 else None
