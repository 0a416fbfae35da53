"""Topic changes from any broker to the active controller (TopicTable's writer).

When this node's quorum leads, the decision runs here (ControllerShell). Otherwise the change
goes as a Kafka request — CreateTopics, CreatePartitions, DeleteTopics, AlterConfigs — to the
controller listener of the quorum leader, as Kafka's brokers forward them; the caller then waits
for its own image to show the result (TopicTable). No leader known, or a leader that no longer
leads: NOT_CONTROLLER, which clients retry.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import structlog

from protocol.acl import AclBinding, AclFilter, binding_of, creation_of, delete_filter_of
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import alter_configs as ac
from protocol.messages import alter_partition as ap
from protocol.messages import create_acls as ca
from protocol.messages import create_partitions as cp
from protocol.messages import create_topics as ct
from protocol.messages import delete_acls as da
from protocol.messages import delete_topics as dt
from protocol.messages import elect_leaders as el
from protocol.messages import partition_reassignments as pr
from protocol.messages.metadata_records import BROKER_RESOURCE, TOPIC_RESOURCE
from protocol.schema import Message
from protocol.topic_partition import TopicPartition

from ..metadata.image import PartitionInfo
from ..partition.replica_state import Assignment, IsrChange
from ..wire import BrokerConnection, WireError, WireSecurity
from .shell import ControllerShell

if TYPE_CHECKING:
    from ..partition import Partition

log = structlog.get_logger()

# an ISR change waiting to be sent: (partition, change, broker epoch, its answer)
_IsrAsk = tuple["Partition", IsrChange, int, "asyncio.Future[tuple[ErrorCode, Assignment | None]]"]

FORWARD_TIMEOUT_S = 15.0


class ControllerClient:
    def __init__(self, node_id: int, shell: ControllerShell,
                 leader_address: Callable[[], tuple[str, int] | None], security: WireSecurity | None = None) -> None:
        self._security = security  # the controller listener's (docs/security.md)
        self.node_id = node_id
        self.shell = shell
        self.leader_address = leader_address
        self._conn: BrokerConnection | None = None
        self._conn_to: tuple[str, int] | None = None
        self._isr_queue: list[_IsrAsk] = []  # ISR changes waiting for the next AlterPartition
        self._isr_sender: asyncio.Task[None] | None = None

    # ---- TopicWriter --------------------------------------------------------------------------
    async def create_topic(self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str],
                           assignments: Sequence[Sequence[int]] | None) -> None:
        if self.shell.active:
            await self.shell.create_topic(name, partitions, replication_factor, configs, assignments)
            return
        topic = ct.CreatableTopic(
            name=name, num_partitions=-1 if assignments else partitions,
            replication_factor=-1 if assignments else replication_factor,
            assignments=[ct.CreatableReplicaAssignment(partition_index=i, broker_ids=list(a))
                         for i, a in enumerate(assignments or [])],
            configs=[ct.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
        resp: Any = await self._forward(ct.CreateTopicsRequest(topics=[topic], timeout_ms=int(FORWARD_TIMEOUT_S * 1000)))
        _raise(resp.topics[0].error_code, resp.topics[0].error_message)

    async def create_partitions(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None) -> None:
        if self.shell.active:
            await self.shell.create_partitions(name, count, assignments)
            return
        topic = cp.CreatePartitionsTopic(name=name, count=count, assignments=None if assignments is None else [
            cp.CreatePartitionsAssignment(broker_ids=list(a)) for a in assignments])
        resp: Any = await self._forward(cp.CreatePartitionsRequest(topics=[topic], timeout_ms=int(FORWARD_TIMEOUT_S * 1000)))
        _raise(resp.results[0].error_code, resp.results[0].error_message)

    async def delete_topic(self, name: str) -> None:
        if self.shell.active:
            await self.shell.delete_topic(name)
            return
        resp: Any = await self._forward(dt.DeleteTopicsRequest(topics=[dt.DeleteTopicState(name=name)], topic_names=[name],
                                                          timeout_ms=int(FORWARD_TIMEOUT_S * 1000)))
        _raise(resp.responses[0].error_code, resp.responses[0].error_message)

    async def set_configs(self, name: str, configs: Mapping[str, str]) -> None:
        if self.shell.active:
            await self.shell.set_configs(name, configs)
            return
        resource = ac.AlterConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=name,
                                           configs=[ac.AlterableConfig(name=k, value=v) for k, v in configs.items()])
        resp: Any = await self._forward(ac.AlterConfigsRequest(resources=[resource], validate_only=False))
        _raise(resp.responses[0].error_code, resp.responses[0].error_message)

    async def set_broker_configs(self, resource_name: str, configs: Mapping[str, str]) -> None:
        """The whole new set of dynamic configs of a BROKER resource, as AlterConfigs carries it."""
        if self.shell.active:
            await self.shell.set_broker_configs(resource_name, configs)
            return
        resource = ac.AlterConfigsResource(resource_type=BROKER_RESOURCE, resource_name=resource_name,
                                           configs=[ac.AlterableConfig(name=k, value=v) for k, v in configs.items()])
        resp: Any = await self._forward(ac.AlterConfigsRequest(resources=[resource], validate_only=False))
        _raise(resp.responses[0].error_code, resp.responses[0].error_message)

    async def alter_partition(self, part: Partition, change: IsrChange, broker_epoch: int | None
                              ) -> tuple[ErrorCode, Assignment | None]:
        """A leader's ISR change (ReplicaManager's), in this broker's registration epoch: (error, the
        assignment as the controller now has it). The changes asked for while a request is out go
        together in the next one, one partition each (Kafka's AlterPartitionManager batches so):
        the controller decides a request at once, so a leader's many changes -- every partition it
        leads losing a follower -- cost one metadata commit, not one each."""
        if broker_epoch is None or part.assignment is None:
            return ErrorCode.STALE_BROKER_EPOCH, None
        fut: asyncio.Future[tuple[ErrorCode, Assignment | None]] = asyncio.get_running_loop().create_future()
        self._isr_queue.append((part, change, broker_epoch, fut))
        if self._isr_sender is None or self._isr_sender.done():
            self._isr_sender = asyncio.get_running_loop().create_task(self._send_isr_changes())
        return await fut

    async def _send_isr_changes(self) -> None:
        """Sends what is queued, a request at a time: each takes one change per partition, all of
        one broker epoch; what it leaves waits for the next."""
        while self._isr_queue:
            batch: list[_IsrAsk] = []
            rest: list[_IsrAsk] = []
            named: set[tuple[str, int]] = set()
            epoch = self._isr_queue[0][2]
            for ask in self._isr_queue:
                key = (ask[0].topic, ask[0].index)
                (batch if ask[2] == epoch and key not in named else rest).append(ask)
                named.add(key)
            self._isr_queue = rest
            try:
                outcomes = await self._alter_partitions(batch, epoch)
            except Exception as e:  # the connection to the controller: each leader tries again later
                for *_, fut in batch:
                    if not fut.done():
                        fut.set_exception(e)
                continue
            for (*_, fut), outcome in zip(batch, outcomes, strict=True):
                if not fut.done():
                    fut.set_result(outcome)

    async def _alter_partitions(self, batch: Sequence[_IsrAsk], broker_epoch: int
                                ) -> list[tuple[ErrorCode, Assignment | None]]:
        """One AlterPartition for `batch`: decided here when this node leads the quorum, else sent to
        the controller. Each member goes with the broker epoch its fetches stated (KIP-903)."""
        image = self.shell.controller.image
        asked = []
        for part, change, _, _ in batch:
            t = image.topics.get(part.topic)
            topic_id, name = (t.topic_id, t.name) if t is not None else (uuid.UUID(int=0), "")
            asked.append((topic_id, name, part.index, change, part.member_epochs(change.new_isr, broker_epoch)))
        infos: list[tuple[int, PartitionInfo | None]] = []
        if self.shell.active:
            codes = await self.shell.alter_partitions(self.node_id, broker_epoch, [
                (topic_id, index, change.leader_epoch, change.partition_epoch, members)
                for topic_id, _, index, change, members in asked])
            for (topic_id, _, index, _, _), code in zip(asked, codes, strict=True):
                now = self.shell.controller.image.topic_by_id(topic_id)
                infos.append((code, now.partitions[index] if now and index < len(now.partitions) else None))
        else:
            by_topic: dict[uuid.UUID, ap.TopicData] = {}
            for topic_id, name, index, change, members in asked:
                by_topic.setdefault(topic_id, ap.TopicData(topic_name=name, topic_id=topic_id, partitions=[]))
                by_topic[topic_id].partitions.append(ap.PartitionData(
                    partition_index=index, leader_epoch=change.leader_epoch, partition_epoch=change.partition_epoch,
                    new_isr=[r for r, _ in members],
                    new_isr_with_epochs=[ap.BrokerState(broker_id=r, broker_epoch=e) for r, e in members]))
            resp: Any = await self._forward(ap.AlterPartitionRequest(broker_id=self.node_id, broker_epoch=broker_epoch,
                                                                     topics=list(by_topic.values())))
            answered = {} if resp.error_code else {(t.topic_id, p.partition_index): p
                                                   for t in resp.topics for p in t.partitions}
            for topic_id, _, index, _, _ in asked:
                p = answered.get((topic_id, index))
                code = resp.error_code if resp.error_code else p.error_code if p is not None else ErrorCode.UNKNOWN_SERVER_ERROR
                infos.append((code, None if code or p is None else
                              PartitionInfo(tuple(), tuple(p.isr), p.leader_id, p.leader_epoch, p.partition_epoch)))
        out: list[tuple[ErrorCode, Assignment | None]] = []
        for (part, *_), (code, info) in zip(batch, infos, strict=True):
            a = part.assignment
            if code or info is None or a is None:
                out.append((ErrorCode(code), None))
            else:
                out.append((ErrorCode.NONE, Assignment(a.replicas, frozenset(info.isr), info.leader, info.leader_epoch,
                                                       info.partition_epoch)))
        return out

    async def elect_leaders(self, wanted: Sequence[TopicPartition] | None,
                            unclean: bool) -> dict[TopicPartition, ErrorCode]:
        """ElectLeaders, decided by the active controller: the outcome per partition."""
        if self.shell.active:
            return await self.shell.elect_leaders(wanted, unclean)
        by_topic: dict[str, list[int]] = {}
        for t, p in wanted or []:
            by_topic.setdefault(t, []).append(p)
        request = el.ElectLeadersRequest(
            election_type=el.UNCLEAN if unclean else el.PREFERRED, timeout_ms=int(FORWARD_TIMEOUT_S * 1000),
            topic_partitions=None if wanted is None else [el.TopicPartitions(topic=t, partitions=ps)
                                                          for t, ps in by_topic.items()])
        resp: Any = await self._forward(request)
        _raise(resp.error_code, None)
        return {TopicPartition(r.topic, p.partition_id): ErrorCode(p.error_code) for r in resp.replica_election_results
                for p in r.partition_result}

    async def reassign(self, wanted: Sequence[tuple[str, int, Sequence[int] | None]]
                       ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments, decided by the active controller."""
        if self.shell.active:
            return await self.shell.reassign(wanted)
        by_topic: dict[str, list[pr.ReassignablePartition]] = {}
        for t, i, target in wanted:
            by_topic.setdefault(t, []).append(pr.ReassignablePartition(
                partition_index=i, replicas=None if target is None else list(target)))
        resp: Any = await self._forward(pr.AlterPartitionReassignmentsRequest(
            timeout_ms=int(FORWARD_TIMEOUT_S * 1000),
            topics=[pr.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()]))
        _raise(resp.error_code, resp.error_message)
        return {TopicPartition(r.name, p.partition_index): (ErrorCode(p.error_code), p.error_message)
                for r in resp.responses for p in r.partitions}

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[tuple[int, str | None]]:
        """CreateAcls, decided by the active controller: (error, message) per binding."""
        if self.shell.active:
            return await self.shell.create_acls(bindings)
        resp: Any = await self._forward(ca.CreateAclsRequest(creations=[creation_of(b) for b in bindings]))
        return [(r.error_code, r.error_message) for r in resp.results]

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[tuple[int, str | None, list[AclBinding]]]:
        """DeleteAcls, decided by the active controller: (error, message, removed) per filter."""
        if self.shell.active:
            return await self.shell.delete_acls(filters)
        resp: Any = await self._forward(da.DeleteAclsRequest(filters=[delete_filter_of(f) for f in filters]))
        return [(r.error_code, r.error_message, [binding_of(m) for m in r.matching_acls]) for r in resp.filter_results]

    # ---- the wire ---------------------------------------------------------------------------------
    async def _forward(self, request: Message) -> object:
        address = self.leader_address()
        if address is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "no metadata quorum leader is known")
        try:
            if self._conn is None or self._conn.closed or self._conn_to != address:
                if self._conn is not None:
                    self._conn.close()
                self._conn = await BrokerConnection.connect(*address, client_id=f"ketch-forward-{self.node_id}",
                                                            timeout=2.0, security=self._security)
                self._conn_to = address
            return await self._conn.request(request, timeout=FORWARD_TIMEOUT_S)
        except (WireError, OSError) as e:
            if self._conn is not None:
                self._conn.close()
            self._conn = None
            log.info("forwarding to the controller failed", controller=address, error=str(e))
            raise KafkaError(ErrorCode.NOT_CONTROLLER,
                             f"the controller at {address[0]}:{address[1]} did not answer") from None

    def close(self) -> None:
        if self._isr_sender is not None:
            self._isr_sender.cancel()
        for *_, fut in self._isr_queue:
            fut.cancel()
        self._isr_queue = []
        if self._conn is not None:
            self._conn.close()


def _raise(code: int, message: str | None) -> None:
    if code:
        raise KafkaError(ErrorCode(code), message or "")
