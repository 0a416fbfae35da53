"""Admin operations: topics, records, log dirs, the cluster, consumer groups, transactions.

Each call routes its request where Kafka wants it (CreateTopics to the controller, DescribeGroups
and OffsetDelete to the group's coordinator, ListGroups/ListTransactions/DescribeLogDirs to every
broker, WriteTxnMarkers and DeleteRecords to the partition leader) and turns error codes into
exceptions. Calls that act on several names return a
dict name -> error (None for success) rather than raising on the first failure, because one bad
name in a batch should not hide what happened to the others; the single-name helpers raise.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from protocol.errors import ErrorCode
from protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.delete_records import DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from protocol.messages.describe_log_dirs import DescribableLogDirTopic, DescribeLogDirsRequest
from protocol.messages.describe_producers import DescribeProducersRequest, TopicRequest
from protocol.messages.describe_transactions import DescribeTransactionsRequest
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.list_transactions import ListTransactionsRequest
from protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

from .assignors import decode_assignment
from .cluster import COORDINATOR_GROUP, COORDINATOR_TRANSACTION, BrokerNode, Cluster, TopicPartition
from .errors import (
    KafkaClientError,
    KafkaTimeoutError,
    RetriableError,
    UnsupportedVersionError,
    error_from_code,
)


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int = 1
    # -1: the broker's default.replication.factor, as Kafka's admin clients leave it unset.
    replication_factor: int = -1
    config: Mapping[str, str] = field(default_factory=dict)


# IncrementalAlterConfigs operations (Kafka's AlterConfigOp.OpType ids)
CONFIG_SET, CONFIG_DELETE, CONFIG_APPEND, CONFIG_SUBTRACT = 0, 1, 2, 3
RESOURCE_TOPIC = 2


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """One key's change: SET to value, DELETE (back to the default), or APPEND/SUBTRACT items of
    a list-valued config (cleanup.policy)."""

    name: str
    value: str | None = None
    op: int = CONFIG_SET


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    internal: bool
    partitions: tuple[PartitionDescription, ...]


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int  # -1: none known
    brokers: tuple[BrokerNode, ...]


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log directory of one broker: the size in bytes of each partition stored in it (only the
    asked-for topics' if describe_log_dirs was given some). total/usable bytes are -1 when the
    broker does not report them (DescribeLogDirs before v4)."""

    broker_id: int
    path: str
    error: KafkaClientError | None
    partition_sizes: Mapping[TopicPartition, int]
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str | None


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ProducerStateDescription:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class Admin:
    """`async with Admin("localhost:9092") as admin: await admin.create_topic("t", 3)`."""

    def __init__(self, bootstrap_servers: str | Iterable[str], *, client_id: str = "ketch-admin",
                 request_timeout: float = 30.0, retry_backoff: float = 0.1) -> None:
        self._cluster = Cluster(bootstrap_servers, client_id=client_id, request_timeout=request_timeout,
                                retry_backoff=retry_backoff, allow_auto_topic_creation=False)
        self.request_timeout = request_timeout

    async def start(self) -> None:
        await self._cluster.refresh_metadata(all_topics=True)

    async def close(self) -> None:
        await self._cluster.close()

    async def __aenter__(self) -> Admin:
        await self.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def _retrying(self, what: str, attempt: Any) -> Any:
        """Run `attempt()` until it does not raise a retriable error, within the request timeout."""
        deadline = time.monotonic() + self.request_timeout
        while True:
            try:
                return await attempt()
            except RetriableError as e:
                if time.monotonic() >= deadline:
                    raise KafkaTimeoutError(f"{what} did not succeed in {self.request_timeout}s: {e}") from e
                await self._cluster.refresh_metadata(all_topics=True)
                await asyncio.sleep(self._cluster.retry_backoff)

    async def _controller_request(self, msg: Any) -> Any:
        node = self._cluster.controller_id
        if node >= 0 and node in self._cluster.brokers:
            return await self._cluster.request(node, msg)
        return await self._cluster.request_any(msg)

    # ------------------------------------------------------------------ topics
    async def create_topics(self, topics: Iterable[NewTopic], *, validate_only: bool = False,
                            timeout: float = 30.0) -> dict[str, KafkaClientError | None]:
        topics = list(topics)
        req = CreateTopicsRequest(
            topics=[CreatableTopic(name=t.name, num_partitions=t.num_partitions,
                                   replication_factor=t.replication_factor,
                                   configs=[CreatableTopicConfig(name=k, value=v) for k, v in t.config.items()])
                    for t in topics],
            timeout_ms=int(timeout * 1000), validate_only=validate_only)

        async def attempt() -> Any:
            resp = await self._controller_request(req)
            for r in resp.topics:
                if r.error_code == ErrorCode.NOT_CONTROLLER:
                    raise error_from_code(r.error_code)
            return resp

        resp = await self._retrying("CreateTopics", attempt)
        out: dict[str, KafkaClientError | None] = {
            r.name: (error_from_code(r.error_code, r.error_message) if r.error_code else None) for r in resp.topics}
        if not validate_only:
            await self._cluster.refresh_metadata([t.name for t in topics if out.get(t.name) is None])
        return out

    async def create_topic(self, name: str, num_partitions: int = 1, replication_factor: int = -1,
                           config: Mapping[str, str] | None = None) -> None:
        """Create one topic; raises TopicAlreadyExistsError and friends."""
        result = await self.create_topics([NewTopic(name, num_partitions, replication_factor, dict(config or {}))])
        err = result.get(name)
        if err is not None:
            raise err

    async def delete_topics(self, names: Iterable[str], *, timeout: float = 30.0) -> dict[str, KafkaClientError | None]:
        names = list(names)
        conn = await self._cluster.any_connection()
        v = conn.version_for(DeleteTopicsRequest)
        if v >= 6:
            req = DeleteTopicsRequest(topics=[DeleteTopicState(name=n) for n in names], timeout_ms=int(timeout * 1000))
        else:
            req = DeleteTopicsRequest(topic_names=names, timeout_ms=int(timeout * 1000))
        resp = await self._retrying("DeleteTopics", lambda: self._controller_request(req))
        out: dict[str, KafkaClientError | None] = {}
        for r in resp.responses:
            out[r.name or ""] = error_from_code(r.error_code, r.error_message) if r.error_code else None
        await self._cluster.refresh_metadata(all_topics=True)
        return out

    async def delete_topic(self, name: str) -> None:
        err = (await self.delete_topics([name])).get(name)
        if err is not None:
            raise err

    async def create_partitions(self, counts: Mapping[str, int], *, validate_only: bool = False,
                                timeout: float = 30.0) -> dict[str, KafkaClientError | None]:
        """Raise each topic's partition count to the given total (partitions are never removed)."""
        req = CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name=n, count=c, assignments=None) for n, c in counts.items()],
            timeout_ms=int(timeout * 1000), validate_only=validate_only)

        async def attempt() -> Any:
            resp = await self._controller_request(req)
            for r in resp.results:
                if r.error_code == ErrorCode.NOT_CONTROLLER:
                    raise error_from_code(r.error_code)
            return resp

        resp = await self._retrying("CreatePartitions", attempt)
        out: dict[str, KafkaClientError | None] = {
            r.name: (error_from_code(r.error_code, r.error_message) if r.error_code else None) for r in resp.results}
        if not validate_only:
            await self._cluster.refresh_metadata([n for n in counts if out.get(n) is None])
        return out

    async def incremental_alter_configs(self, changes: Mapping[str, Iterable[AlterConfigOp]], *,
                                        validate_only: bool = False) -> dict[str, KafkaClientError | None]:
        """Change single config keys of topics; every other override stays as it is."""
        req = IncrementalAlterConfigsRequest(resources=[
            AlterConfigsResource(resource_type=RESOURCE_TOPIC, resource_name=topic, configs=[
                AlterableConfig(name=o.name, config_operation=o.op, value=o.value) for o in ops])
            for topic, ops in changes.items()], validate_only=validate_only)
        resp = await self._retrying("IncrementalAlterConfigs", lambda: self._cluster.request_any(req))
        return {r.resource_name: (error_from_code(r.error_code, r.error_message) if r.error_code else None)
                for r in resp.responses}

    async def describe_topic_configs(self, name: str) -> dict[str, str | None]:
        """Every config of topic `name` with its effective value (a default or an override)."""
        req = DescribeConfigsRequest(resources=[DescribeConfigsResource(
            resource_type=RESOURCE_TOPIC, resource_name=name, configuration_keys=None)])
        resp = await self._retrying("DescribeConfigs", lambda: self._cluster.request_any(req))
        [r] = resp.results
        if r.error_code:
            raise error_from_code(r.error_code, r.error_message or name)
        return {c.name: c.value for c in r.configs}

    async def list_topics(self, *, internal: bool = False) -> set[str]:
        await self._cluster.refresh_metadata(all_topics=True)
        return {n for n, t in self._cluster.topics.items() if internal or not t.internal}

    async def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicDescription]:
        """Partitions, leaders and replicas; unknown names raise UnknownTopicError."""
        if names is None:
            await self._cluster.refresh_metadata(all_topics=True)
            wanted = [n for n, t in self._cluster.topics.items()]
        else:
            wanted = list(names)
            await self._cluster.refresh_metadata(wanted)
        out = {}
        for n in wanted:
            t = self._cluster.topics.get(n)
            if t is None or t.error:
                raise error_from_code(t.error if t is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, n)
            out[n] = TopicDescription(n, t.internal, tuple(
                PartitionDescription(p.partition, p.leader, p.replicas, p.isr)
                for _, p in sorted(t.partitions.items())))
        return out

    async def delete_records(self, offsets: Mapping[TopicPartition, int], *, timeout: float = 30.0
                             ) -> dict[TopicPartition, int | KafkaClientError]:
        """Delete each partition's records below the given offset (-1: its high watermark), asking
        each partition's leader. Per partition the new low watermark, or the error (an offset
        past the high watermark: OFFSET_OUT_OF_RANGE; an unknown partition: UnknownTopicError).
        A leader that moved is found again and retried."""
        out: dict[TopicPartition, int | KafkaClientError] = {}
        pending = dict(offsets)
        if not pending:
            return out

        async def attempt() -> None:
            await self._cluster.refresh_metadata(sorted({tp.topic for tp in pending}))
            by_leader: dict[int, dict[str, list[DeleteRecordsPartition]]] = {}
            retry: KafkaClientError | None = None
            for tp, offset in list(pending.items()):
                t = self._cluster.topics.get(tp.topic)
                if t is None or t.error or tp.partition not in t.partitions:
                    out[tp] = error_from_code(t.error if t is not None and t.error
                                              else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp}")
                    del pending[tp]
                    continue
                leader = self._cluster.leader_for(tp)
                if leader is None:
                    retry = error_from_code(ErrorCode.LEADER_NOT_AVAILABLE, f"{tp}")
                    continue
                by_leader.setdefault(leader, {}).setdefault(tp.topic, []).append(
                    DeleteRecordsPartition(partition_index=tp.partition, offset=offset))
            for leader, topics in by_leader.items():
                resp = await self._cluster.request(leader, DeleteRecordsRequest(
                    topics=[DeleteRecordsTopic(name=n, partitions=ps) for n, ps in topics.items()],
                    timeout_ms=int(timeout * 1000)))
                for rt in resp.topics:
                    for rp in rt.partitions:
                        tp = TopicPartition(rt.name, rp.partition_index)
                        if tp not in pending:
                            continue
                        if rp.error_code and ErrorCode(rp.error_code).retriable \
                                and rp.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                            retry = error_from_code(rp.error_code, f"{tp}")
                            continue
                        out[tp] = error_from_code(rp.error_code, f"{tp}") if rp.error_code else rp.low_watermark
                        del pending[tp]
            if pending:
                raise retry or error_from_code(ErrorCode.UNKNOWN_SERVER_ERROR, f"no answer for {sorted(pending)}")

        await self._retrying("DeleteRecords", attempt)
        return out

    async def describe_log_dirs(self, topics: Iterable[str] | None = None) -> list[LogDirDescription]:
        """Every broker's log directories with the size of each partition in them; with `topics`,
        only those topics' partitions (an unknown name raises UnknownTopicError)."""
        wanted: list[DescribableLogDirTopic] | None = None
        if topics is not None:
            names = list(topics)
            await self._cluster.refresh_metadata(names)
            wanted = []
            for n in names:
                t = self._cluster.topics.get(n)
                if t is None or t.error:
                    raise error_from_code(t.error if t is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, n)
                wanted.append(DescribableLogDirTopic(topic=n, partitions=sorted(t.partitions)))
        else:
            await self._cluster.refresh_metadata(all_topics=True)
        out: list[LogDirDescription] = []
        for node in sorted(self._cluster.brokers):
            conn = await self._cluster.connection(node)
            v = conn.version_for(DescribeLogDirsRequest)
            resp = await conn.request(DescribeLogDirsRequest(topics=wanted), version=v)
            if v >= 3 and resp.error_code:
                raise error_from_code(resp.error_code, f"DescribeLogDirs on broker {node}")
            for r in resp.results:
                sizes = {TopicPartition(t.name, p.partition_index): p.partition_size
                         for t in r.topics for p in t.partitions if not p.is_future_key}
                out.append(LogDirDescription(
                    node, r.log_dir, error_from_code(r.error_code, r.log_dir) if r.error_code else None, sizes,
                    r.total_bytes if v >= 4 else -1, r.usable_bytes if v >= 4 else -1))
        return out

    # ------------------------------------------------------------------ cluster
    async def describe_cluster(self) -> ClusterDescription:
        """Cluster id, controller and brokers (DescribeCluster; Metadata where the broker lacks it)."""
        conn = await self._cluster.any_connection()
        try:
            v = conn.version_for(DescribeClusterRequest)
        except UnsupportedVersionError:
            await self._cluster.refresh_metadata()
            return ClusterDescription(self._cluster.cluster_id, self._cluster.controller_id,
                                      tuple(b for _, b in sorted(self._cluster.brokers.items())))
        resp = await conn.request(DescribeClusterRequest(), version=v)
        if resp.error_code:
            raise error_from_code(resp.error_code, resp.error_message)
        return ClusterDescription(resp.cluster_id, resp.controller_id, tuple(
            BrokerNode(b.broker_id, b.host, b.port, b.rack) for b in sorted(resp.brokers, key=lambda b: b.broker_id)))

    # ------------------------------------------------------------------ groups
    async def list_groups(self) -> list[GroupListing]:
        """Every group on every broker (each broker lists the groups it coordinates)."""
        await self._cluster.refresh_metadata(all_topics=True)
        out: list[GroupListing] = []
        for node in list(self._cluster.brokers):
            conn = await self._cluster.connection(node)
            v = conn.version_for(ListGroupsRequest)
            resp = await conn.request(ListGroupsRequest(), version=v)
            if resp.error_code:
                raise error_from_code(resp.error_code, f"ListGroups on broker {node}")
            out += [GroupListing(g.group_id, g.protocol_type, g.group_state if v >= 4 else None)
                    for g in resp.groups]
        return out

    async def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        out = {}
        for gid in group_ids:
            async def attempt(gid: str = gid) -> DescribeGroupsResponse:
                node = await self._cluster.coordinator(gid, COORDINATOR_GROUP)
                resp: DescribeGroupsResponse = await self._cluster.request(node, DescribeGroupsRequest(groups=[gid]))
                code = resp.groups[0].error_code
                if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                    self._cluster.forget_coordinator(gid, COORDINATOR_GROUP)
                if code:
                    raise error_from_code(code, f"group {gid}")
                return resp

            g = (await self._retrying("DescribeGroups", attempt)).groups[0]
            members = []
            for m in g.members:
                assignment: tuple[TopicPartition, ...] = ()
                if g.protocol_type == "consumer" and m.member_assignment:
                    try:
                        assignment = tuple(decode_assignment(m.member_assignment).partitions)
                    except ValueError:  # another protocol's bytes (DecodeError): describe without them
                        assignment = ()
                members.append(MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                                 assignment))
            out[gid] = GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data, tuple(members))
        return out

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, KafkaClientError | None]:
        """Delete empty groups and their offsets; per group None, or the error (NON_EMPTY_GROUP,
        GROUP_ID_NOT_FOUND, ...). A coordinator that moved or is still loading is retried."""
        out: dict[str, KafkaClientError | None] = {}
        for gid in group_ids:
            async def attempt(gid: str = gid) -> int:
                node = await self._cluster.coordinator(gid, COORDINATOR_GROUP)
                resp = await self._cluster.request(node, DeleteGroupsRequest(groups_names=[gid]))
                code = next((r.error_code for r in resp.results if r.group_id == gid), ErrorCode.UNKNOWN_SERVER_ERROR)
                if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                    self._cluster.forget_coordinator(gid, COORDINATOR_GROUP)
                if code and ErrorCode(code).retriable:
                    raise error_from_code(code, f"group {gid}")
                return int(code)

            code = await self._retrying("DeleteGroups", attempt)
            out[gid] = error_from_code(code, f"group {gid}") if code else None
        return out

    async def delete_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition]
                                   ) -> dict[TopicPartition, KafkaClientError | None]:
        """Delete a group's committed offsets for some partitions (KIP-496), asking its coordinator.
        Per partition None, or the error (GROUP_SUBSCRIBED_TO_TOPIC, UNKNOWN_TOPIC_OR_PARTITION);
        a group-level error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...) raises."""
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            if tp.partition not in topics.setdefault(tp.topic, []):
                topics[tp.topic].append(tp.partition)
        req = OffsetDeleteRequest(group_id=group_id, topics=[
            OffsetDeleteRequestTopic(name=n, partitions=[OffsetDeleteRequestPartition(partition_index=p) for p in ps])
            for n, ps in topics.items()])

        async def attempt() -> Any:
            node = await self._cluster.coordinator(group_id, COORDINATOR_GROUP)
            resp = await self._cluster.request(node, req)
            code = resp.error_code
            if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self._cluster.forget_coordinator(group_id, COORDINATOR_GROUP)
            if code:
                raise error_from_code(code, f"group {group_id}")
            return resp

        resp = await self._retrying("OffsetDelete", attempt)
        return {TopicPartition(t.name, p.partition_index):
                (error_from_code(p.error_code, f"{t.name}-{p.partition_index}") if p.error_code else None)
                for t in resp.topics for p in t.partitions}

    # ------------------------------------------------------------------ transactions
    async def list_transactions(self, *, states: Iterable[str] = (), producer_ids: Iterable[int] = ()
                                ) -> list[TransactionListing]:
        await self._cluster.refresh_metadata(all_topics=True)
        out: list[TransactionListing] = []
        for node in list(self._cluster.brokers):
            resp = await self._cluster.request(node, ListTransactionsRequest(
                state_filters=list(states), producer_id_filters=list(producer_ids)))
            if resp.error_code:
                raise error_from_code(resp.error_code, f"ListTransactions on broker {node}")
            out += [TransactionListing(t.transactional_id, t.producer_id, t.transaction_state)
                    for t in resp.transaction_states]
        return out

    async def describe_transactions(self, transactional_ids: Iterable[str]) -> dict[str, TransactionDescription]:
        out = {}
        for tid in transactional_ids:
            async def attempt(tid: str = tid) -> Any:
                node = await self._cluster.coordinator(tid, COORDINATOR_TRANSACTION)
                resp = await self._cluster.request(node, DescribeTransactionsRequest(transactional_ids=[tid]))
                code = resp.transaction_states[0].error_code
                if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                    self._cluster.forget_coordinator(tid, COORDINATOR_TRANSACTION)
                if code:
                    raise error_from_code(code, f"transactional id {tid}")
                return resp.transaction_states[0]

            s = await self._retrying("DescribeTransactions", attempt)
            out[tid] = TransactionDescription(
                s.transactional_id, s.transaction_state, s.producer_id, s.producer_epoch,
                s.transaction_timeout_ms, s.transaction_start_time_ms,
                tuple(TopicPartition(t.topic, p) for t in s.topics for p in t.partitions))
        return out

    async def describe_producers(self, tp: TopicPartition) -> list[ProducerStateDescription]:
        """Active producers of a partition, asked of its leader (what abort_transaction needs)."""
        await self._cluster.refresh_metadata([tp.topic])
        leader = self._cluster.leader_for(tp)
        if leader is None:
            raise error_from_code(ErrorCode.LEADER_NOT_AVAILABLE, f"{tp}")
        resp = await self._cluster.request(leader, DescribeProducersRequest(
            topics=[TopicRequest(name=tp.topic, partition_indexes=[tp.partition])]))
        p = resp.topics[0].partitions[0]
        if p.error_code:
            raise error_from_code(p.error_code, p.error_message)
        return [ProducerStateDescription(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                                         s.coordinator_epoch, s.current_txn_start_offset)
                for s in p.active_producers]

    async def abort_transaction(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                                coordinator_epoch: int) -> None:
        """Write an ABORT marker for a hanging transaction on one partition (KIP-664), as
        `kafka-transactions.sh abort` does: the leader is sent WriteTxnMarkers directly. A Ketch
        broker takes markers only on its inter-broker listener (docs/transactions.md), so this
        Admin must be bootstrapped from that listener; elsewhere CLUSTER_AUTHORIZATION_FAILED."""
        await self._cluster.refresh_metadata([tp.topic])
        leader = self._cluster.leader_for(tp)
        if leader is None:
            raise error_from_code(ErrorCode.LEADER_NOT_AVAILABLE, f"{tp}")
        resp = await self._cluster.request(leader, WriteTxnMarkersRequest(markers=[WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
            topics=[WritableTxnMarkerTopic(name=tp.topic, partition_indexes=[tp.partition])],
            coordinator_epoch=coordinator_epoch)]))
        for m in resp.markers:
            for t in m.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise error_from_code(p.error_code, f"abort marker on {t.name}-{p.partition_index}")
