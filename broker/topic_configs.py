"""Changing topic configs: the rules AlterConfigs (33) and IncrementalAlterConfigs (44) share.

Both answer per resource, and Kafka checks each resource in a fixed order: a resource named twice,
duplicate keys, null values, the resource type, then the topic and its new settings. Admin tools
branch on the error code, so that order is kept. TOPIC resources change a topic's overrides;
BROKER resources ("" the cluster-wide default, or this broker's id) change the dynamic broker
configs — the broker-level defaults of topic configs only (broker/metadata/dynamic_configs.py);
every other broker setting is static (ketch.toml, KETCH_* variables, flags), and the broker says
so instead of pretending to apply it. Broker loggers cannot be changed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from protocol.errors import ErrorCode, KafkaError

from .config_catalog import TOPIC_CONFIGS
from .metadata import dynamic_configs
from .topics import TopicTable

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


@dataclass(frozen=True, slots=True)
class ConfigOp:
    name: str
    value: str | None
    op: int = SET


@dataclass(frozen=True, slots=True)
class ConfigResource:
    type: int
    name: str
    ops: tuple[ConfigOp, ...]


def apply_ops(current: Mapping[str, str], defaults: Mapping[str, str], ops: Iterable[ConfigOp]) -> dict[str, str]:
    """The overrides after `ops`. APPEND and SUBTRACT work on the comma-separated list in the
    override, or in the default when there is none (so APPEND to an unset cleanup.policy starts
    from "delete"), as Kafka's controller does."""
    new = dict(current)
    for o in ops:
        if o.op == SET:
            assert o.value is not None  # null values were refused before
            new[o.name] = o.value
        elif o.op == DELETE:
            new.pop(o.name, None)
        else:
            d = TOPIC_CONFIGS.get(o.name)
            if d is None or d.type != "LIST":
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Can't {OP_NAMES[o.op]} to key {o.name} because its type is not LIST.")
            base = new.get(o.name, defaults.get(o.name)) or ""
            parts = [p for p in base.split(",") if p]
            for v in (o.value or "").split(","):
                if o.op == APPEND and v not in parts:
                    parts.append(v)
                elif o.op == SUBTRACT and v in parts:
                    parts.remove(v)
            new[o.name] = ",".join(parts)
    return new


async def alter(topics: TopicTable, node_id: int, resources: Sequence[ConfigResource], *, incremental: bool,
          validate_only: bool) -> list[tuple[int, str | None]]:
    """(error code, message) per resource, in request order; nothing changes when validate_only."""
    named = Counter((r.type, r.name) for r in resources)
    out: list[tuple[int, str | None]] = []
    for r in resources:
        try:
            if named[(r.type, r.name)] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            _check_shape(r, incremental)
            if r.type == RESOURCE_TOPIC:
                await _alter_topic(topics, r, incremental=incremental, validate_only=validate_only)
            elif r.type == RESOURCE_BROKER:
                if r.name not in ("", str(node_id)):
                    raise KafkaError(ErrorCode.INVALID_REQUEST,
                                     f"Unexpected broker id, expected {node_id}, but received {r.name}")
                await _alter_broker(topics, r, incremental=incremental, validate_only=validate_only)
            elif r.type == RESOURCE_BROKER_LOGGER:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Dynamic broker logger configs are not supported: Ketch reads its log level at "
                                 "startup; change it there and restart")
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {r.type}")
        except KafkaError as e:
            out.append((int(e.code), e.message or None))
        else:
            out.append((0, None))
    return out


def _check_shape(r: ConfigResource, incremental: bool) -> None:
    names = [o.name for o in r.ops]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [o.name for o in r.ops if o.value is None and not (incremental and o.op == DELETE)]
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
    for o in r.ops:
        if o.op not in OP_NAMES:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {o.op}")


async def _alter_topic(topics: TopicTable, r: ConfigResource, *, incremental: bool, validate_only: bool) -> None:
    topic = topics.get(r.name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{r.name}' does not exist.")
    if incremental:
        new = apply_ops(topic.configs, topics.effective_configs({}), r.ops)
    else:  # AlterConfigs: what is not named goes back to its default
        new = {o.name: o.value or "" for o in r.ops}
    if validate_only:
        topics.check_alter_configs(r.name, new)
    else:
        await topics.set_configs(r.name, new)


async def _alter_broker(topics: TopicTable, r: ConfigResource, *, incremental: bool, validate_only: bool) -> None:
    """A BROKER resource's dynamic configs: the new whole set, checked, then written."""
    current = dict(topics.image.broker_configs.get(r.name, {}))
    if incremental:
        # APPEND / SUBTRACT work on the topic config the broker setting is the default of
        to_topic, to_broker = dynamic_configs.TOPIC_DEFAULTS, {v: k for k, v in dynamic_configs.TOPIC_DEFAULTS.items()}
        ops = [ConfigOp(to_topic.get(o.name, o.name), o.value, o.op) for o in r.ops]
        applied = apply_ops({to_topic[k]: v for k, v in current.items()}, topics.effective_configs({}), ops)
        new = {to_broker.get(k, k): v for k, v in applied.items()}
    else:  # AlterConfigs: the named set replaces the resource's dynamic configs
        new = {o.name: o.value or "" for o in r.ops}
    dynamic_configs.check(new)
    if not validate_only:
        await topics.set_broker_configs(r.name, new)
