"""DescribeConfigs (32): topic configs (overrides and defaults) and the broker's own settings,
with Kafka's types, sources, synonyms and documentation (broker/config_catalog.py). A default set
by a dynamic broker config (broker/metadata/dynamic_configs.py) is reported with Kafka's source:
DYNAMIC_BROKER_CONFIG for this broker's own, DYNAMIC_DEFAULT_BROKER_CONFIG for the cluster-wide
one — so every topic's min.insync.replicas, which the controller sets cluster-wide, reads as a
Kafka 4.1+ broker reports it. The BROKER resource "" lists the cluster-wide dynamic configs only."""

from __future__ import annotations

from collections.abc import Mapping

from protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)

from ..config import BrokerConfig
from ..config_catalog import (
    SOURCE_DEFAULT,
    SOURCE_STATIC_BROKER,
    SOURCE_TOPIC,
    TOPIC_CONFIGS,
    TYPE_IDS,
    broker_entries,
)
from ..context import BrokerContext, ClientInfo
from ..metadata.dynamic_configs import SOURCE_DYNAMIC_DEFAULT_BROKER, TOPIC_DEFAULTS

KEY = 32
ORDERED = False
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4


def _topic_entries(ctx: BrokerContext, overrides: Mapping[str, str], req: DescribeConfigsRequest
                   ) -> list[DescribeConfigsResourceResult]:
    broker_defaults = ctx.topics.broker_defaults()
    dynamic = ctx.topics.dynamic_defaults()
    out = []
    for name, value in sorted(ctx.topics.effective_configs(overrides).items()):
        d = TOPIC_CONFIGS[name]
        # Kafka's order: the most specific source first, the built-in default last.
        synonyms = []
        if name in overrides:
            synonyms.append(DescribeConfigsSynonym(name=name, value=overrides[name], source=SOURCE_TOPIC))
        if name in dynamic:
            dname, dvalue, dsource = dynamic[name]
            synonyms.append(DescribeConfigsSynonym(name=dname, value=dvalue, source=dsource))
        if name in broker_defaults:
            bname, bvalue = broker_defaults[name]
            synonyms.append(DescribeConfigsSynonym(name=bname, value=bvalue, source=SOURCE_STATIC_BROKER))
        synonyms.append(DescribeConfigsSynonym(name=d.synonyms[0] if d.synonyms else name, value=d.default,
                                               source=SOURCE_DEFAULT))
        source = synonyms[0].source
        out.append(DescribeConfigsResourceResult(
            name=name, value=value, read_only=False, is_default=source == SOURCE_DEFAULT, config_source=source,
            is_sensitive=False, synonyms=synonyms if req.include_synonyms else [], config_type=TYPE_IDS[d.type],
            documentation=d.doc if req.include_documentation else None))
    return out


def _broker_entries(ctx: BrokerContext, req: DescribeConfigsRequest) -> list[DescribeConfigsResourceResult]:
    cfg = ctx.config
    host, port = cfg.advertised_host_port
    inter_broker = cfg.inter_broker_advertise or cfg.inter_broker_listen  # as configured (port 0: any)
    dynamic = {name: (value, source) for name, value, source in ctx.topics.dynamic_defaults().values()}
    out = []
    for e in broker_entries(cfg, BrokerConfig(), f"{host}:{port}", inter_broker, ctx.topics.broker_defaults()):
        source = SOURCE_DEFAULT if e.is_default else SOURCE_STATIC_BROKER
        synonyms = [DescribeConfigsSynonym(name=e.name, value=e.value, source=source)]
        value = e.value
        if e.name in dynamic:
            value, source = dynamic[e.name]
            synonyms.insert(0, DescribeConfigsSynonym(name=e.name, value=value, source=source))
        out.append(DescribeConfigsResourceResult(
            name=e.name, value=value, read_only=e.name not in TOPIC_DEFAULTS, is_default=source == SOURCE_DEFAULT,
            config_source=source, is_sensitive=e.sensitive, synonyms=synonyms if req.include_synonyms else [],
            config_type=TYPE_IDS[e.type], documentation=e.doc if req.include_documentation else None))
    return out


def _cluster_default_entries(ctx: BrokerContext, req: DescribeConfigsRequest) -> list[DescribeConfigsResourceResult]:
    """The BROKER resource "": what is set cluster-wide, as Kafka lists it."""
    out = []
    for name, value in sorted(ctx.topics.image.broker_configs.get("", {}).items()):
        d = TOPIC_CONFIGS[TOPIC_DEFAULTS[name]]
        out.append(DescribeConfigsResourceResult(
            name=name, value=value, read_only=False, is_default=False, config_source=SOURCE_DYNAMIC_DEFAULT_BROKER,
            is_sensitive=False, synonyms=[DescribeConfigsSynonym(name=name, value=value,
                                                                 source=SOURCE_DYNAMIC_DEFAULT_BROKER)]
            if req.include_synonyms else [], config_type=TYPE_IDS[d.type],
            documentation=d.doc if req.include_documentation else None))
    return out


def refusal(ctx: BrokerContext, client: ClientInfo, op: AclOperation, resource_type: int,
            name: str) -> tuple[ErrorCode, str] | None:
    """Why `client` may not describe or alter (`op`) a config resource, or None: a topic's needs
    `op` on the topic, a broker's on the cluster (Kafka's checks; DescribeConfigs, AlterConfigs and
    IncrementalAlterConfigs share them)."""
    authz = ctx.authorizer
    if resource_type == RESOURCE_TOPIC and not authz.allows(client, op, ResourceType.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
    if resource_type == RESOURCE_BROKER and not authz.allows(client, op, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    return None


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = []
    for res in req.resources:
        entries: list[DescribeConfigsResourceResult] = []
        code, msg = 0, None
        refused = refusal(ctx, client, AclOperation.DESCRIBE_CONFIGS, res.resource_type, res.resource_name)
        if refused is not None:
            code, msg = refused
        elif res.resource_type == RESOURCE_TOPIC:
            topic = ctx.topics.get(res.resource_name)
            if topic is None:
                code, msg = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {res.resource_name!r} does not exist"
            else:
                entries = _topic_entries(ctx, topic.configs, req)
        elif res.resource_type == RESOURCE_BROKER:
            if res.resource_name not in ("", str(ctx.node_id)):
                code, msg = ErrorCode.INVALID_REQUEST, f"this broker is node {ctx.node_id}"
            elif res.resource_name == "":
                entries = _cluster_default_entries(ctx, req)
            else:
                entries = _broker_entries(ctx, req)
        else:
            code, msg = ErrorCode.INVALID_REQUEST, f"resource type {res.resource_type} is not supported"
        keys = res.configuration_keys
        configs = [e for e in entries if keys is None or e.name in keys]
        results.append(DescribeConfigsResult(error_code=code, error_message=msg, resource_type=res.resource_type,
                                             resource_name=res.resource_name, configs=configs))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
