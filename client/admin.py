"""Admin operations: topics, records, log dirs, the cluster, consumer groups, transactions.

Each call routes its request where Kafka wants it (CreateTopics, CreatePartitions, ElectLeaders
and reassignments to the controller; DescribeGroups, OffsetFetch, OffsetCommit, OffsetDelete and
DescribeTransactions to the group's or transactional id's coordinator; ListGroups,
ListTransactions and DescribeLogDirs to every broker; ListOffsets, DescribeProducers,
WriteTxnMarkers and DeleteRecords to each partition's leader), finds a moved leader or
coordinator again, and turns error codes into exceptions. Calls that act on several names return
a dict name -> error (None for success) rather than raising on the first failure, because one bad
name in a batch should not hide what happened to the others; the single-name helpers raise.
`ketch topic|group|txn|cluster` (client/admin_cli/) is this class on the command line.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from protocol.acl import (
    AclBinding,
    AclFilter,
    binding_of,
    creation_of,
    delete_filter_of,
    describe_request_of,
    described,
)
from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.errors import ErrorCode
from protocol.messages import partition_reassignments as pr
from protocol.messages import user_scram_credentials as usc
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest, DescribedAssignment
from protocol.messages.create_acls import CreateAclsRequest
from protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from protocol.messages.delete_acls import DeleteAclsRequest
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.delete_records import DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from protocol.messages.describe_log_dirs import DescribableLogDirTopic, DescribeLogDirsRequest
from protocol.messages.describe_producers import DescribeProducersRequest, TopicRequest
from protocol.messages.describe_quorum import (
    DescribeQuorumPartitionRequest,
    DescribeQuorumRequest,
    DescribeQuorumTopicRequest,
)
from protocol.messages.describe_transactions import DescribeTransactionsRequest
from protocol.messages.elect_leaders import PREFERRED, UNCLEAN, ElectLeadersRequest
from protocol.messages.elect_leaders import TopicPartitions as ElectTopicPartitions
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.list_transactions import ListTransactionsRequest
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from protocol.scram import BY_NAME as SCRAM_BY_NAME
from protocol.scram import BY_TYPE as SCRAM_BY_TYPE

from .admin_types import (
    CONFIG_APPEND,
    CONFIG_DELETE,
    CONFIG_SET,
    CONFIG_SUBTRACT,
    RESOURCE_TOPIC,
    AlterConfigOp,
    ClusterDescription,
    ConfigEntry,
    GroupDescription,
    GroupListing,
    LogDirDescription,
    MemberDescription,
    NewTopic,
    PartitionDescription,
    PartitionReassignment,
    ProducerStateDescription,
    QuorumDescription,
    QuorumVoter,
    TopicDescription,
    TransactionDescription,
    TransactionListing,
)
from .assignors import decode_assignment
from .cluster import COORDINATOR_GROUP, COORDINATOR_TRANSACTION, BrokerNode, Cluster, TopicPartition
from .connection import Connection
from .errors import (
    KafkaClientError,
    KafkaTimeoutError,
    RetriableError,
    UnsupportedVersionError,
    check,
    error_from_code,
)
from .fetcher import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from .security import Security

__all__ = [
    "CONFIG_APPEND", "CONFIG_DELETE", "CONFIG_SET", "CONFIG_SUBTRACT", "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP",
    "RESOURCE_TOPIC", "Admin", "AlterConfigOp", "ClusterDescription", "ConfigEntry", "GroupDescription",
    "GroupListing", "LogDirDescription", "MemberDescription", "NewTopic", "PartitionDescription",
    "PartitionReassignment", "ProducerStateDescription", "QuorumDescription", "QuorumVoter", "TopicDescription",
    "TransactionDescription", "TransactionListing",
]
_COORDINATOR_MOVED = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                      ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
METADATA_TOPIC = "__cluster_metadata"


class Admin:
    """`async with Admin("localhost:9092") as admin: await admin.create_topic("t", 3)`."""

    def __init__(self, bootstrap_servers: str | Iterable[str], *, client_id: str = "ketch-admin",
                 request_timeout: float = 30.0, retry_backoff: float = 0.1, clock: Clock = SYSTEM_CLOCK,
                 security: Security | None = None) -> None:
        self._cluster = Cluster(bootstrap_servers, client_id=client_id, request_timeout=request_timeout,
                                retry_backoff=retry_backoff, allow_auto_topic_creation=False, clock=clock,
                                security=security)
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
        deadline = self._cluster.clock.monotonic() + self.request_timeout
        while True:
            try:
                return await attempt()
            except RetriableError as e:
                if self._cluster.clock.monotonic() >= deadline:
                    raise KafkaTimeoutError(f"{what} did not succeed in {self.request_timeout}s: {e}") from e
                await self._cluster.refresh_metadata(all_topics=True)
                await asyncio.sleep(self._cluster.retry_backoff)

    async def _to_controller(self, what: str, msg: Any, codes_of: Callable[[Any], Iterable[int]]) -> Any:
        """The controller's response to `msg`, asked again (after a metadata refresh) while one
        of `codes_of(response)` says NOT_CONTROLLER: the controller moved."""
        async def attempt() -> Any:
            node = self._cluster.controller_id
            if node >= 0 and node in self._cluster.brokers:
                resp = await self._cluster.request(node, msg)
            else:
                resp = await self._cluster.request_any(msg)
            if ErrorCode.NOT_CONTROLLER in codes_of(resp):
                raise error_from_code(ErrorCode.NOT_CONTROLLER, what)
            return resp

        return await self._retrying(what, attempt)

    async def _to_coordinator(self, what: str, key: str, key_type: int, msg: Any,
                              code_of: Callable[[Any], int]) -> Any:
        """The response of `key`'s coordinator to `msg`. While `code_of(response)` is retriable,
        or the coordinator cannot be reached, it is looked up again and asked again; any other
        code is the caller's to read."""
        async def attempt() -> Any:
            node = await self._cluster.coordinator(key, key_type)
            try:
                resp = await self._cluster.request(node, msg)
            except RetriableError:
                self._cluster.forget_coordinator(key, key_type)
                raise
            code = code_of(resp)
            if code in _COORDINATOR_MOVED:
                self._cluster.forget_coordinator(key, key_type)
            if code and ErrorCode(code).retriable:
                raise error_from_code(code, f"{what} {key}")
            return resp

        return await self._retrying(what, attempt)

    async def _known(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """`tps`, once the metadata shows every one of them: a missing topic or partition raises
        UnknownTopicError at once rather than being retried until the timeout."""
        tps = list(tps)
        await self._cluster.refresh_metadata(sorted({tp.topic for tp in tps}))
        for tp in tps:
            t = self._cluster.topics.get(tp.topic)
            if t is None or t.error or tp.partition not in t.partitions:
                raise error_from_code(t.error if t is not None and t.error
                                      else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp}")
        return tps

    def _by_leader(self, tps: Iterable[TopicPartition]) -> dict[int, dict[str, list[int]]]:
        """leader -> topic -> partitions; LEADER_NOT_AVAILABLE (retriable) for a leaderless one."""
        out: dict[int, dict[str, list[int]]] = {}
        for tp in tps:
            leader = self._cluster.leader_for(tp)
            if leader is None:
                raise error_from_code(ErrorCode.LEADER_NOT_AVAILABLE, f"{tp}")
            out.setdefault(leader, {}).setdefault(tp.topic, []).append(tp.partition)
        return out

    # ------------------------------------------------------------------ ACLs
    async def create_acls(self, bindings: Iterable[AclBinding]) -> list[KafkaClientError | None]:
        """Create ACL bindings (any broker forwards them to the controller); per binding, in
        order, None or why not (SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED
        without ALTER on the cluster, INVALID_REQUEST for a binding Kafka refuses)."""
        bindings = list(bindings)
        req = CreateAclsRequest(creations=[creation_of(b) for b in bindings])

        async def attempt() -> Any:
            resp = await self._cluster.request_any(req)
            for r in resp.results:
                if r.error_code and ErrorCode(r.error_code).retriable:
                    raise error_from_code(r.error_code, "CreateAcls")
            return resp

        resp = await self._retrying("CreateAcls", attempt)
        return [error_from_code(r.error_code, r.error_message) if r.error_code else None for r in resp.results]

    async def describe_acls(self, selector: AclFilter | None = None) -> list[AclBinding]:
        """The ACL bindings `selector` selects (None: all), as a broker's metadata image has them."""
        req = describe_request_of(selector or AclFilter())

        async def attempt() -> Any:
            resp = await self._cluster.request_any(req)
            if resp.error_code:
                raise error_from_code(resp.error_code, resp.error_message or "DescribeAcls")
            return resp

        return described((await self._retrying("DescribeAcls", attempt)).resources)

    async def delete_acls(self, selectors: Iterable[AclFilter]) -> list[list[AclBinding]]:
        """Delete the bindings each filter selects; per filter, the bindings it removed. A filter
        that fails raises (its error), after the others were applied."""
        selectors = list(selectors)
        req = DeleteAclsRequest(filters=[delete_filter_of(f) for f in selectors])

        async def attempt() -> Any:
            resp = await self._cluster.request_any(req)
            for r in resp.filter_results:
                if r.error_code and ErrorCode(r.error_code).retriable:
                    raise error_from_code(r.error_code, "DeleteAcls")
            return resp

        resp = await self._retrying("DeleteAcls", attempt)
        for r in resp.filter_results:
            if r.error_code:
                raise error_from_code(r.error_code, r.error_message or "DeleteAcls")
        return [[binding_of(m) for m in r.matching_acls] for r in resp.filter_results]

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
        resp = await self._to_controller("CreateTopics", req, lambda r: [t.error_code for t in r.topics])
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
        resp = await self._to_controller("DeleteTopics", req, lambda r: [t.error_code for t in r.responses])
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
        resp = await self._to_controller("CreatePartitions", req, lambda r: [t.error_code for t in r.results])
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

    async def describe_configs(self, topics: Iterable[str], keys: Sequence[str] | None = None
                               ) -> dict[str, list[ConfigEntry] | KafkaClientError]:
        """Per topic its configs (only `keys`, if given) with their effective values and sources,
        or the error (UnknownTopicError for a missing one)."""
        req = DescribeConfigsRequest(resources=[DescribeConfigsResource(
            resource_type=RESOURCE_TOPIC, resource_name=n, configuration_keys=None if keys is None else list(keys))
            for n in topics])
        resp = await self._retrying("DescribeConfigs", lambda: self._cluster.request_any(req))
        return {r.resource_name: (error_from_code(r.error_code, r.error_message or r.resource_name) if r.error_code
                                  else [ConfigEntry(c.name, c.value, c.config_source) for c in r.configs])
                for r in resp.results}

    async def describe_topic_configs(self, name: str) -> dict[str, str | None]:
        """Every config of topic `name` with its effective value (a default or an override)."""
        entries = (await self.describe_configs([name]))[name]
        if isinstance(entries, KafkaClientError):
            raise entries
        return {c.name: c.value for c in entries}

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
            t = self._cluster.described(n)
            out[n] = TopicDescription(n, t.internal, tuple(
                PartitionDescription(p.partition, p.leader, p.replicas, p.isr)
                for _, p in sorted(t.partitions.items())))
        return out

    async def list_offsets(self, tps: Iterable[TopicPartition], timestamp: int, *, read_committed: bool = False
                           ) -> dict[TopicPartition, int]:
        """Each partition's offset at `timestamp` (EARLIEST_TIMESTAMP: its log start;
        LATEST_TIMESTAMP: its high watermark, or its last stable offset with read_committed),
        asked of its leader. A missing partition raises UnknownTopicError."""
        known = await self._known(tps)
        return await self._cluster.list_offsets(known, timestamp, read_committed=read_committed)

    async def elect_leaders(self, partitions: Iterable[TopicPartition] | None = None, *, unclean: bool = False,
                            timeout: float = 30.0) -> dict[TopicPartition, KafkaClientError | None]:
        """Give partitions (None: all) back to their preferred replica, or with `unclean` to any live
        replica when none in sync is left. Per partition None, or why not (ELECTION_NOT_NEEDED...)."""
        wanted: list[ElectTopicPartitions] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            wanted = [ElectTopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()]
        req = ElectLeadersRequest(election_type=UNCLEAN if unclean else PREFERRED, topic_partitions=wanted,
                                  timeout_ms=int(timeout * 1000))
        resp = await self._to_controller("ElectLeaders", req, lambda r: [r.error_code])
        if resp.error_code:
            raise error_from_code(resp.error_code, "ElectLeaders")
        return {TopicPartition(r.topic, p.partition_id):
                error_from_code(p.error_code, p.error_message) if p.error_code else None
                for r in resp.replica_election_results for p in r.partition_result}

    async def alter_partition_reassignments(self, plan: Mapping[TopicPartition, Sequence[int] | None], *,
                                            timeout: float = 30.0) -> dict[TopicPartition, KafkaClientError | None]:
        """Move each partition's replicas to the given brokers (None: cancel its reassignment).
        Per partition None once the move has started, or the error."""
        by_topic: dict[str, list[pr.ReassignablePartition]] = {}
        for tp, replicas in plan.items():
            by_topic.setdefault(tp.topic, []).append(pr.ReassignablePartition(
                partition_index=tp.partition, replicas=None if replicas is None else list(replicas)))
        req = pr.AlterPartitionReassignmentsRequest(
            timeout_ms=int(timeout * 1000), topics=[pr.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
        resp = await self._to_controller("AlterPartitionReassignments", req, lambda r: [r.error_code])
        if resp.error_code:
            raise error_from_code(resp.error_code, resp.error_message or "AlterPartitionReassignments")
        return {TopicPartition(r.name, p.partition_index):
                error_from_code(p.error_code, p.error_message) if p.error_code else None
                for r in resp.responses for p in r.partitions}

    async def list_partition_reassignments(self) -> dict[TopicPartition, PartitionReassignment]:
        """Every reassignment under way."""
        req = pr.ListPartitionReassignmentsRequest(timeout_ms=int(self.request_timeout * 1000), topics=None)
        resp = await self._to_controller("ListPartitionReassignments", req, lambda r: [r.error_code])
        if resp.error_code:
            raise error_from_code(resp.error_code, resp.error_message or "ListPartitionReassignments")
        return {TopicPartition(t.name, p.partition_index): PartitionReassignment(
                    tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
                for t in resp.topics for p in t.partitions}

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
                here = [(TopicPartition(t.name, p.partition_index), p) for t in r.topics for p in t.partitions
                        if not p.is_future_key]
                out.append(LogDirDescription(
                    node, r.log_dir, error_from_code(r.error_code, r.log_dir) if r.error_code else None,
                    {tp: p.partition_size for tp, p in here}, r.total_bytes if v >= 4 else -1,
                    r.usable_bytes if v >= 4 else -1, {tp: p.offset_lag for tp, p in here}))
        return out

    # ------------------------------------------------------------------ cluster
    async def describe_cluster(self) -> ClusterDescription:
        """Cluster id, controller and brokers, the fenced ones apart (DescribeCluster; Metadata,
        which lists only the unfenced, where the broker lacks it)."""
        conn = await self._cluster.any_connection()
        try:
            v = conn.version_for(DescribeClusterRequest)
        except UnsupportedVersionError:
            await self._cluster.refresh_metadata()
            return ClusterDescription(self._cluster.cluster_id, self._cluster.controller_id,
                                      tuple(b for _, b in sorted(self._cluster.brokers.items())))
        resp = await conn.request(DescribeClusterRequest(include_fenced_brokers=True), version=v)
        if resp.error_code:
            raise error_from_code(resp.error_code, resp.error_message)
        nodes = [(b.is_fenced, BrokerNode(b.broker_id, b.host, b.port, b.rack))
                 for b in sorted(resp.brokers, key=lambda b: b.broker_id)]
        return ClusterDescription(resp.cluster_id, resp.controller_id, tuple(n for fenced, n in nodes if not fenced),
                                  tuple(n for fenced, n in nodes if fenced))

    # ------------------------------------------------------------------ users (SCRAM credentials)
    async def describe_user_scram_credentials(self, users: Iterable[str] | None = None
                                              ) -> dict[str, dict[str, int]]:
        """user -> {mechanism name: iterations} (DescribeUserScramCredentials); every user
        without `users`. A named user without a credential raises (RESOURCE_NOT_FOUND)."""
        names = None if users is None else [usc.UserName(name=u) for u in users]
        resp = await self._retrying("DescribeUserScramCredentials", lambda: self._cluster.request_any(
            usc.DescribeUserScramCredentialsRequest(users=names)))
        check(resp.error_code, resp.error_message)
        out: dict[str, dict[str, int]] = {}
        for r in resp.results:
            check(r.error_code, r.error_message)
            out[r.user] = {SCRAM_BY_TYPE[i.mechanism].name: i.iterations for i in r.credential_infos
                           if i.mechanism in SCRAM_BY_TYPE}
        return out

    async def alter_user_scram_credentials(self, *, upsert: Mapping[tuple[str, str], str] | None = None,
                                           delete: Iterable[tuple[str, str]] = (), iterations: int = 4096
                                           ) -> dict[str, KafkaClientError | None]:
        """Set ((user, mechanism) -> password) and delete ((user, mechanism)) SCRAM credentials
        (AlterUserScramCredentials, decided by the controller). The password is salted here (a
        fresh random salt, `iterations` rounds): only the salted password leaves this process,
        and the broker keeps only the keys derived from it. An error per user, None if done."""
        upsertions = []
        for (user, mech), password in (upsert or {}).items():
            m = SCRAM_BY_NAME[mech]
            salt = secrets.token_bytes(32)
            upsertions.append(usc.ScramCredentialUpsertion(name=user, mechanism=m.type, iterations=iterations,
                                                           salt=salt,
                                                           salted_password=m.salted_password(password, salt, iterations)))
        deletions = [usc.ScramCredentialDeletion(name=u, mechanism=SCRAM_BY_NAME[m].type) for u, m in delete]
        resp = await self._to_controller("AlterUserScramCredentials", usc.AlterUserScramCredentialsRequest(
            deletions=deletions, upsertions=upsertions), lambda r: [x.error_code for x in r.results])
        return {r.user: error_from_code(r.error_code, r.error_message) if r.error_code else None for r in resp.results}

    async def describe_quorum(self) -> QuorumDescription:
        """The metadata quorum's leader, epoch, high watermark and each voter's log end. Only the
        quorum leader knows the voters' progress: a broker forwards the request there, and one that
        cannot (NOT_LEADER_OR_FOLLOWER naming the leader) sends us to the leader ourselves."""
        req = DescribeQuorumRequest(topics=[DescribeQuorumTopicRequest(
            topic_name=METADATA_TOPIC, partitions=[DescribeQuorumPartitionRequest(partition_index=0)])])

        async def attempt() -> Any:
            resp = await self._cluster.request_any(req)
            p = resp.topics[0].partitions[0] if not resp.error_code else None
            if p is not None and p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and p.leader_id >= 0:
                resp = await self._ask_quorum_leader(p.leader_id, resp.nodes, req)
                p = resp.topics[0].partitions[0] if not resp.error_code else None
            if p is None:
                raise error_from_code(resp.error_code, resp.error_message or "DescribeQuorum")
            if p.error_code:
                raise error_from_code(p.error_code, p.error_message or "DescribeQuorum")
            return p

        p = await self._retrying("DescribeQuorum", attempt)
        return QuorumDescription(p.leader_id, p.leader_epoch, p.high_watermark, tuple(
            QuorumVoter(v.replica_id, v.log_end_offset, v.last_fetch_timestamp) for v in p.current_voters))

    async def _ask_quorum_leader(self, leader: int, nodes: Any, req: DescribeQuorumRequest) -> Any:
        """The leader as a broker when it is one we know, else at its controller listener."""
        if leader in self._cluster.brokers:
            return await self._cluster.request(leader, req)
        listener = next((ls[0] for n in nodes if n.node_id == leader and (ls := n.listeners)), None)
        if listener is None:
            raise error_from_code(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                  f"the quorum leader is node {leader}, whose address is not known")
        conn = await Connection.open(listener.host, listener.port, client_id=self._cluster.client_id,
                                     request_timeout=self.request_timeout, security=self._cluster.security)
        try:
            return await conn.request(req)
        finally:
            conn.close()

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
        """Classic groups by DescribeGroups; a group it does not know as classic (GROUP_ID_NOT_FOUND,
        as Kafka 4 answers for a KIP-848 consumer group) by ConsumerGroupDescribe."""
        out = {}
        for gid in group_ids:
            resp: DescribeGroupsResponse = await self._to_coordinator(
                "DescribeGroups", gid, COORDINATOR_GROUP, DescribeGroupsRequest(groups=[gid]),
                lambda r: r.groups[0].error_code)
            g = resp.groups[0]
            if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
                out[gid] = await self._describe_consumer_group(gid)
                continue
            if g.error_code:
                raise error_from_code(g.error_code, f"group {gid}")
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

    async def _describe_consumer_group(self, gid: str) -> GroupDescription:
        resp = await self._to_coordinator("ConsumerGroupDescribe", gid, COORDINATOR_GROUP,
                                          ConsumerGroupDescribeRequest(group_ids=[gid]),
                                          lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        if g.error_code:
            raise error_from_code(g.error_code, f"group {gid}")

        def tps(a: DescribedAssignment) -> tuple[TopicPartition, ...]:
            return tuple(TopicPartition(t.topic_name, p) for t in a.topic_partitions for p in sorted(t.partitions))

        members = tuple(MemberDescription(m.member_id, m.instance_id, m.client_id, m.client_host, tps(m.assignment),
                                          m.member_epoch, tps(m.target_assignment)) for m in g.members)
        return GroupDescription(g.group_id, g.group_state, "consumer", g.assignor_name, members, "consumer",
                                g.group_epoch, g.assignment_epoch)

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, KafkaClientError | None]:
        """Delete empty groups and their offsets; per group None, or the error (NON_EMPTY_GROUP,
        GROUP_ID_NOT_FOUND, ...). A coordinator that moved or is still loading is retried."""
        out: dict[str, KafkaClientError | None] = {}
        for gid in group_ids:
            def code_of(resp: Any, gid: str = gid) -> int:
                return next((r.error_code for r in resp.results if r.group_id == gid), ErrorCode.UNKNOWN_SERVER_ERROR)

            code = code_of(await self._to_coordinator("DeleteGroups", gid, COORDINATOR_GROUP,
                                                      DeleteGroupsRequest(groups_names=[gid]), code_of))
            out[gid] = error_from_code(code, f"group {gid}") if code else None
        return out

    async def list_group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """Every offset the group has committed, asked of its coordinator (OffsetFetch)."""
        resp = await self._to_coordinator("OffsetFetch", group_id, COORDINATOR_GROUP,
                                          OffsetFetchRequest(group_id=group_id, topics=None), lambda r: r.error_code)
        if resp.error_code:
            raise error_from_code(resp.error_code, f"group {group_id}")
        return {TopicPartition(t.name, p.partition_index): p.committed_offset
                for t in resp.topics for p in t.partitions if p.committed_offset >= 0}

    async def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]
                                  ) -> dict[TopicPartition, KafkaClientError | None]:
        """Set a group's committed offsets from outside the group (kafka-consumer-groups
        --reset-offsets): the coordinator takes them only while the group has no members.
        Per partition None, or the error (UNKNOWN_MEMBER_ID while the group is active)."""
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append(OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=offset, committed_metadata=""))
        req = OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                                  topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
        resp = await self._to_coordinator("OffsetCommit", group_id, COORDINATOR_GROUP, req, lambda r: next(
            (p.error_code for t in r.topics for p in t.partitions if p.error_code in _COORDINATOR_MOVED), 0))
        return {TopicPartition(t.name, p.partition_index):
                error_from_code(p.error_code, f"{t.name}-{p.partition_index}") if p.error_code else None
                for t in resp.topics for p in t.partitions}

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
        resp = await self._to_coordinator("OffsetDelete", group_id, COORDINATOR_GROUP, req, lambda r: r.error_code)
        if resp.error_code:
            raise error_from_code(resp.error_code, f"group {group_id}")
        return {TopicPartition(t.name, p.partition_index):
                (error_from_code(p.error_code, f"{t.name}-{p.partition_index}") if p.error_code else None)
                for t in resp.topics for p in t.partitions}

    # ------------------------------------------------------------------ transactions
    async def list_transactions(self, *, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                                min_duration_ms: int = -1) -> list[TransactionListing]:
        """Every coordinator's transactional ids, filtered by state, producer id and (when not -1)
        how long the transaction has been running. An unknown state name raises."""
        await self._cluster.refresh_metadata(all_topics=True)
        out: list[TransactionListing] = []
        for node in list(self._cluster.brokers):
            conn = await self._cluster.connection(node)
            v = conn.version_for(ListTransactionsRequest)
            if min_duration_ms >= 0 and v < 1:
                raise UnsupportedVersionError(f"broker {node} cannot filter transactions by duration")
            resp = await conn.request(ListTransactionsRequest(
                state_filters=list(states), producer_id_filters=list(producer_ids), duration_filter=min_duration_ms),
                version=v)
            if resp.error_code:
                raise error_from_code(resp.error_code, f"ListTransactions on broker {node}")
            if resp.unknown_state_filters:
                raise KafkaClientError(f"unknown transaction states: {', '.join(resp.unknown_state_filters)}")
            out += [TransactionListing(t.transactional_id, t.producer_id, t.transaction_state, node)
                    for t in resp.transaction_states]
        return out

    async def describe_transactions(self, transactional_ids: Iterable[str]) -> dict[str, TransactionDescription]:
        out = {}
        for tid in transactional_ids:
            resp = await self._to_coordinator(
                "DescribeTransactions", tid, COORDINATOR_TRANSACTION, DescribeTransactionsRequest(transactional_ids=[tid]),
                lambda r: r.transaction_states[0].error_code)
            s = resp.transaction_states[0]
            if s.error_code:
                raise error_from_code(s.error_code, f"transactional id {tid}")
            out[tid] = TransactionDescription(
                s.transactional_id, s.transaction_state, s.producer_id, s.producer_epoch,
                s.transaction_timeout_ms, s.transaction_start_time_ms,
                tuple(TopicPartition(t.topic, p) for t in s.topics for p in t.partitions))
        return out

    async def describe_producers(self, tp: TopicPartition) -> list[ProducerStateDescription]:
        """Active producers of a partition, asked of its leader (what abort_transaction needs)."""
        return (await self.describe_producers_of([tp]))[tp]

    async def describe_producers_of(self, tps: Iterable[TopicPartition]
                                    ) -> dict[TopicPartition, list[ProducerStateDescription]]:
        """Active producers of each partition, asked of its leader: producer state lives with the
        leader's log. A missing partition raises UnknownTopicError; a moved leader is found again."""
        known = await self._known(tps)

        async def attempt() -> dict[TopicPartition, list[ProducerStateDescription]]:
            out: dict[TopicPartition, list[ProducerStateDescription]] = {}
            for leader, topics in self._by_leader(known).items():
                resp = await self._cluster.request(leader, DescribeProducersRequest(
                    topics=[TopicRequest(name=t, partition_indexes=ps) for t, ps in topics.items()]))
                for t in resp.topics:
                    for p in t.partitions:
                        if p.error_code:
                            raise error_from_code(p.error_code, p.error_message or f"{t.name}-{p.partition_index}")
                        out[TopicPartition(t.name, p.partition_index)] = [ProducerStateDescription(
                            s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp, s.coordinator_epoch,
                            s.current_txn_start_offset) for s in p.active_producers]
            return out

        result: dict[TopicPartition, list[ProducerStateDescription]] = await self._retrying("DescribeProducers", attempt)
        return result

    async def abort_transaction(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                                coordinator_epoch: int) -> None:
        """Write an ABORT marker for a hanging transaction on one partition (KIP-664), as
        `kafka-transactions.sh abort` does: the leader is sent WriteTxnMarkers directly. A Ketch
        broker takes markers only on its inter-broker listener (docs/transactions.md), so this
        Admin must be bootstrapped from that listener; elsewhere CLUSTER_AUTHORIZATION_FAILED."""
        [known] = await self._known([tp])
        req = WriteTxnMarkersRequest(markers=[WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
            topics=[WritableTxnMarkerTopic(name=tp.topic, partition_indexes=[tp.partition])],
            coordinator_epoch=coordinator_epoch)])

        async def attempt() -> None:
            [leader] = self._by_leader([known])
            resp = await self._cluster.request(leader, req)
            for m in resp.markers:
                for t in m.topics:
                    for p in t.partitions:
                        if p.error_code:
                            raise error_from_code(p.error_code, f"abort marker on {t.name}-{p.partition_index}")

        await self._retrying("WriteTxnMarkers", attempt)
