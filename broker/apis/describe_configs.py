"""DescribeConfigs (32): topic configs (overrides and defaults) and the broker's own settings."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)

if TYPE_CHECKING:
    from ..context import BrokerContext, ClientInfo

KEY = 32
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = []
    for res in req.resources:
        entries: dict[str, tuple[str | None, int]] = {}
        code, msg = 0, None
        if res.resource_type == RESOURCE_TOPIC:
            topic = ctx.topics.get(res.resource_name)
            if topic is None:
                code, msg = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {res.resource_name!r} does not exist"
            else:
                for k, v in ctx.topics.effective_configs(topic.configs).items():
                    entries[k] = (v, SOURCE_TOPIC if k in topic.configs else SOURCE_DEFAULT)
        elif res.resource_type == RESOURCE_BROKER:
            if res.resource_name not in ("", str(ctx.node_id)):
                code, msg = ErrorCode.INVALID_REQUEST, f"this broker is node {ctx.node_id}"
            else:
                for f in dataclasses.fields(ctx.config):
                    v = getattr(ctx.config, f.name)
                    entries[f.name.replace("_", ".")] = (None if v is None else str(v), SOURCE_STATIC_BROKER)
        else:
            code, msg = ErrorCode.INVALID_REQUEST, f"resource type {res.resource_type} is not supported"
        keys = res.configuration_keys
        configs = [
            DescribeConfigsResourceResult(name=k, value=v, read_only=res.resource_type == RESOURCE_BROKER,
                                          is_default=src == SOURCE_DEFAULT, config_source=src, is_sensitive=False)
            for k, (v, src) in sorted(entries.items()) if keys is None or k in keys
        ]
        results.append(DescribeConfigsResult(error_code=code, error_message=msg, resource_type=res.resource_type,
                                             resource_name=res.resource_name, configs=configs))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
