"""Options of the `ketch` data source, parsed once on the driver and shipped (pickled) to tasks.

Names follow Spark's Kafka connector where one exists (`kafka.bootstrap.servers`, `subscribe`,
`assign`, `startingOffsets`, `endingOffsets`, `maxOffsetsPerTrigger`, `topic`,
`kafka.isolation.level`, and the clients' security settings `kafka.security.protocol`,
`kafka.sasl.*`, `kafka.ssl.*`), so that porting a job is mostly changing `format("kafka")`.
Spark hands options over case-insensitively; the lookups here are too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from client import Security, security_from_properties
from protocol.topic_partition import TopicPartition

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"

# The sink's commitMode (docs/pipeline.md): each task commits its own transaction, or the driver
# commits a micro-batch's prepared transactions together (KIP-939; needs a broker that allows 2PC).
PER_TASK = "per-task"
BATCH_ATOMIC = "batch-atomic"
COMMIT_MODES = (PER_TASK, BATCH_ATOMIC)


class OptionError(ValueError):
    """An option is missing or malformed; raised on the driver, before any task runs."""


def _get(options: Mapping[str, str], *names: str, default: str | None = None) -> str | None:
    lowered = {k.lower(): v for k, v in options.items()}
    for n in names:
        if n.lower() in lowered:
            return lowered[n.lower()]
    return default


def _bool(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise OptionError(f"expected true or false, not {value!r}")


def _positive_int(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        raise OptionError(f"{name} must be an integer, not {value!r}") from None
    if n <= 0:
        raise OptionError(f"{name} must be positive, not {n}")
    return n


@dataclass(frozen=True)
class SourceOptions:
    """What to read and how."""

    bootstrap: str
    topics: tuple[str, ...]  # subscribe=
    assign: tuple[TopicPartition, ...]  # assign= (a JSON {"topic": [partitions]})
    starting: str  # "earliest" | "latest" | JSON per partition
    ending: str  # batch only: "latest" | JSON per partition
    isolation_level: str
    max_offsets_per_trigger: int | None
    use_arrow: bool
    poll_timeout_ms: int
    security: Security = field(default_factory=Security)  # kafka.security.protocol, kafka.sasl.*, kafka.ssl.*

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == READ_COMMITTED


@dataclass(frozen=True)
class SinkOptions:
    """Where to write and how."""

    bootstrap: str
    topic: str | None  # default topic; a `topic` column overrides it per row
    marker_topic: str | None  # where exactly-once markers are committed (default: `topic`)
    use_arrow: bool
    transaction_timeout_ms: int
    linger_ms: int
    batch_size: int
    txn_prefix: str
    commit_mode: str = PER_TASK
    checkpoint: str | None = None  # the query's checkpointLocation option, when given
    security: Security = field(default_factory=Security)  # kafka.security.protocol, kafka.sasl.*, kafka.ssl.*

    @property
    def batch_atomic(self) -> bool:
        return self.commit_mode == BATCH_ATOMIC


def bootstrap_of(options: Mapping[str, str]) -> str:
    value = _get(options, "kafka.bootstrap.servers", "bootstrap.servers", "bootstrapServers")
    if not value:
        raise OptionError("option kafka.bootstrap.servers (host:port[,host:port]) is required")
    return value


# the options that are the clients' security settings, less their "kafka." prefix
SECURITY_PREFIXES = ("kafka.security.", "kafka.sasl.", "kafka.ssl.")


def security_of(options: Mapping[str, str]) -> Security:
    """Every client of the source or sink (admin, consumers, producers) connects with this."""
    props = {k.lower().removeprefix("kafka."): v for k, v in options.items()
             if k.lower().startswith(SECURITY_PREFIXES)}
    try:
        return security_from_properties(props)
    except ValueError as e:
        raise OptionError(f"kafka.* security option: {e}") from None


def source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    subscribe = _get(options, "subscribe")
    assign_json = _get(options, "assign")
    if bool(subscribe) == bool(assign_json):
        raise OptionError("exactly one of the options subscribe (topic list) or assign (JSON) is required")
    topics: tuple[str, ...] = ()
    assign: tuple[TopicPartition, ...] = ()
    if subscribe:
        topics = tuple(t.strip() for t in subscribe.split(",") if t.strip())
        if not topics:
            raise OptionError("subscribe names no topic")
    else:
        assert assign_json is not None
        try:
            parsed = json.loads(assign_json)
            assign = tuple(sorted(TopicPartition(str(t), int(p)) for t, ps in parsed.items() for p in ps))
        except (ValueError, AttributeError, TypeError):
            raise OptionError(f'assign must look like {{"topic": [0, 1]}}, not {assign_json!r}') from None
    isolation = (_get(options, "kafka.isolation.level", "isolation.level", default=READ_COMMITTED)
                 or READ_COMMITTED)
    if isolation not in (READ_COMMITTED, READ_UNCOMMITTED):
        raise OptionError(f"kafka.isolation.level must be read_committed or read_uncommitted, not {isolation!r}")
    starting = _get(options, "startingOffsets", default="latest" if streaming else "earliest") or "earliest"
    ending = _get(options, "endingOffsets", default="latest") or "latest"
    if streaming and _get(options, "endingOffsets") is not None:
        raise OptionError("endingOffsets is for batch reads only")
    if not streaming and starting == "latest":
        raise OptionError("startingOffsets=latest makes no sense for a batch read")
    if not streaming and ending == "earliest":
        raise OptionError("endingOffsets=earliest makes no sense for a batch read")
    max_per_trigger = _positive_int(_get(options, "maxOffsetsPerTrigger", "maxRowsPerTrigger"),
                                    "maxOffsetsPerTrigger")
    poll = _positive_int(_get(options, "pollTimeoutMs", default="120000"), "pollTimeoutMs")
    assert poll is not None
    return SourceOptions(
        bootstrap=bootstrap_of(options), topics=topics, assign=assign, starting=starting, ending=ending,
        isolation_level=isolation, max_offsets_per_trigger=max_per_trigger,
        use_arrow=_bool(_get(options, "useArrow"), True), poll_timeout_ms=poll, security=security_of(options),
    )


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    topic = _get(options, "topic")
    marker_topic = _get(options, "markerTopic") or topic
    timeout = _positive_int(_get(options, "transactionTimeoutMs", "kafka.transaction.timeout.ms",
                                 default="60000"), "transactionTimeoutMs")
    linger = int(_get(options, "kafka.linger.ms", "lingerMs", default="5") or "5")
    batch_size = _positive_int(_get(options, "kafka.batch.size", "batchSize", default="262144"), "batchSize")
    assert timeout is not None and batch_size is not None
    mode = (_get(options, "commitMode", default=PER_TASK) or PER_TASK).strip().lower()
    if mode not in COMMIT_MODES:
        raise OptionError(f"commitMode must be one of {', '.join(COMMIT_MODES)}, not {mode!r}")
    return SinkOptions(
        bootstrap=bootstrap_of(options), topic=topic, marker_topic=marker_topic,
        use_arrow=_bool(_get(options, "useArrow"), True), transaction_timeout_ms=timeout,
        linger_ms=linger, batch_size=batch_size, txn_prefix=_get(options, "transactionalIdPrefix",
                                                                  default="ketch-sink") or "ketch-sink",
        commit_mode=mode, checkpoint=_get(options, "checkpointLocation"), security=security_of(options),
    )
