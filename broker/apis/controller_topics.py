"""Topic changes on the controller listener: CreateTopics (19), DeleteTopics (20), AlterConfigs
(33; topic configs, and a BROKER resource's whole set of dynamic configs), CreatePartitions (37) and ElectLeaders (43) as brokers forward them
(broker/controller/client.py), and AlterPartition (56) from partition leaders — Kafka's ControllerApis. The active controller decides and answers once its entry has committed; any
other node answers NOT_CONTROLLER and never forwards again (no loops between stale views).
Names and configs are checked again here: the controller listener is open to anyone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages import alter_configs as ac
from protocol.messages import alter_partition as ap
from protocol.messages import create_partitions as cp
from protocol.messages import create_topics as ct
from protocol.messages import delete_topics as dt
from protocol.messages import elect_leaders as el
from protocol.messages.metadata_records import BROKER_RESOURCE, TOPIC_RESOURCE
from protocol.primitives import ZERO_UUID
from protocol.topic_partition import TopicPartition

from ..context import ClientInfo, ControllerContext
from ..metadata import dynamic_configs
from ..topics import validate_topic_name

if TYPE_CHECKING:
    from ..controller.quorum_controller import IsrRequest

ORDERED = False


async def create_topics(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                        req: ct.CreateTopicsRequest) -> ct.CreateTopicsResponse:
    out = []
    for t in req.topics:
        try:
            validate_topic_name(t.name)
            configs = {c.name: c.value for c in t.configs if c.value is not None}
            ctx.topics.check_configs(configs)
            assignments = [list(a.broker_ids) for a in sorted(t.assignments, key=lambda a: a.partition_index)]
            n = len(assignments) if assignments else (ctx.config.num_partitions if t.num_partitions == -1
                                                      else t.num_partitions)
            rf = len(assignments[0]) if assignments else (ctx.config.default_replication_factor
                                                          if t.replication_factor == -1 else t.replication_factor)
            if n <= 0 or rf <= 0:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS if n <= 0 else ErrorCode.INVALID_REPLICATION_FACTOR,
                                 "partitions and replication factor must be positive")
            topic_id = await ctx.shell.create_topic(t.name, n, rf, configs, assignments)
        except KafkaError as e:
            out.append(ct.CreatableTopicResult(name=t.name, error_code=e.code, error_message=e.message))
            continue
        out.append(ct.CreatableTopicResult(name=t.name, topic_id=topic_id, error_code=0, error_message=None,
                                           num_partitions=n, replication_factor=rf))
    return ct.CreateTopicsResponse(throttle_time_ms=0, topics=out)


async def create_partitions(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                            req: cp.CreatePartitionsRequest) -> cp.CreatePartitionsResponse:
    out = []
    for t in req.topics:
        assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
        try:
            await ctx.shell.create_partitions(t.name, t.count, assignments)
        except KafkaError as e:
            out.append(cp.CreatePartitionsTopicResult(name=t.name, error_code=e.code, error_message=e.message))
        else:
            out.append(cp.CreatePartitionsTopicResult(name=t.name, error_code=0, error_message=None))
    return cp.CreatePartitionsResponse(throttle_time_ms=0, results=out)


async def delete_topics(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                        req: dt.DeleteTopicsRequest) -> dt.DeleteTopicsResponse:
    names = [t.name for t in req.topics] if header.api_version >= 6 else list(req.topic_names)
    out = []
    for name in names:
        try:
            topic_id = await ctx.shell.delete_topic(name or "")
        except KafkaError as e:
            out.append(dt.DeletableTopicResult(name=name, topic_id=ZERO_UUID, error_code=e.code,
                                               error_message=e.message))
        else:
            out.append(dt.DeletableTopicResult(name=name, topic_id=topic_id, error_code=0))
    return dt.DeleteTopicsResponse(throttle_time_ms=0, responses=out)


async def alter_configs(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                        req: ac.AlterConfigsRequest) -> ac.AlterConfigsResponse:
    out = []
    for r in req.resources:
        try:
            configs = {c.name: c.value or "" for c in r.configs}
            if r.resource_type == BROKER_RESOURCE:  # dynamic broker configs (broker/metadata/dynamic_configs.py)
                dynamic_configs.check(configs)
                if not req.validate_only:
                    await ctx.shell.set_broker_configs(r.resource_name, configs)
                out.append(ac.AlterConfigsResourceResponse(error_code=0, resource_type=r.resource_type,
                                                           resource_name=r.resource_name))
                continue
            if r.resource_type != TOPIC_RESOURCE:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "the controller takes topic and broker configs only")
            ctx.topics.check_configs(configs)
            if not req.validate_only:
                await ctx.shell.set_configs(r.resource_name, configs)
        except KafkaError as e:
            out.append(ac.AlterConfigsResourceResponse(error_code=e.code, error_message=e.message,
                                                       resource_type=r.resource_type, resource_name=r.resource_name))
        else:
            out.append(ac.AlterConfigsResourceResponse(error_code=0, resource_type=r.resource_type,
                                                       resource_name=r.resource_name))
    return ac.AlterConfigsResponse(throttle_time_ms=0, responses=out)


async def alter_partition(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                          req: ap.AlterPartitionRequest) -> ap.AlterPartitionResponse:
    """ISR changes from a partition leader, decided together and committed as one entry (as
    Kafka's controller writes one request's records); the answer carries each partition's state
    as committed (or the error and the state the controller holds)."""
    shell, controller = ctx.shell, ctx.controller
    if not shell.active:
        return ap.AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if header.api_version < 2 else ErrorCode.UNKNOWN_TOPIC_ID
    infos = [controller.image.topics.get(t.topic_name) if header.api_version < 2 else
             controller.image.topic_by_id(t.topic_id) for t in req.topics]
    asked: list[IsrRequest] = []
    for t, info in zip(req.topics, infos, strict=True):
        if info is None:
            continue
        for p in t.partitions:
            # KIP-903: from v3 each member comes with its broker epoch, checked by the controller
            isr = [(b.broker_id, b.broker_epoch) for b in p.new_isr_with_epochs] if header.api_version >= 3 \
                else [(r, -1) for r in p.new_isr]
            asked.append((info.topic_id, p.partition_index, p.leader_epoch, p.partition_epoch, isr))
    try:
        decided = iter(await shell.alter_partitions(req.broker_id, req.broker_epoch, asked) if asked else [])
    except KafkaError as e:
        decided = iter([e.code] * len(asked))
    topics = []
    for t, info in zip(req.topics, infos, strict=True):
        results = []
        for p in t.partitions:
            code = next(decided) if info is not None else unknown
            now = controller.image.topic_by_id(info.topic_id) if info is not None else None
            state = now.partitions[p.partition_index] if now and 0 <= p.partition_index < len(now.partitions) else None
            results.append(ap.PartitionResult(
                partition_index=p.partition_index, error_code=code,
                leader_id=state.leader if state else -1, leader_epoch=state.leader_epoch if state else -1,
                isr=list(state.isr) if state else [], partition_epoch=state.partition_epoch if state else -1))
        topics.append(ap.TopicResult(topic_name=t.topic_name, topic_id=t.topic_id, partitions=results))
    return ap.AlterPartitionResponse(error_code=0, topics=topics)


def election_response(outcome: dict[TopicPartition, ErrorCode]) -> el.ElectLeadersResponse:
    by_topic: dict[str, list[el.PartitionResult]] = {}
    for (topic, partition), code in sorted(outcome.items()):
        by_topic.setdefault(topic, []).append(el.PartitionResult(
            partition_id=partition, error_code=code, error_message=None if code == 0 else code.name))
    return el.ElectLeadersResponse(error_code=0, replica_election_results=[
        el.ReplicaElectionResult(topic=t, partition_result=ps) for t, ps in by_topic.items()])


def wanted_partitions(req: el.ElectLeadersRequest) -> list[TopicPartition] | None:
    if req.topic_partitions is None:
        return None
    return [TopicPartition(t.topic, p) for t in req.topic_partitions for p in t.partitions]


async def elect_leaders(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                        req: el.ElectLeadersRequest) -> el.ElectLeadersResponse:
    unclean = header.api_version >= 1 and req.election_type == el.UNCLEAN
    try:
        outcome = await ctx.shell.elect_leaders(wanted_partitions(req), unclean)
    except KafkaError as e:
        return el.ElectLeadersResponse(error_code=e.code)
    return election_response(outcome)
