"""Every topic config Kafka 4.x defines, and the broker settings DescribeConfigs reports.

One table, so CreateTopics, AlterConfigs, IncrementalAlterConfigs and DescribeConfigs agree on what
exists, its type, its default, the broker setting it falls back to (its synonyms, Kafka's names)
and what a value must look like. Admin tools (kafka-configs, AdminClient.describeConfigs, UIs)
show these fields as they come; a config Kafka has and we refuse breaks scripts written for Kafka.

`acted_on` says whether Ketch's logs honour the setting; the others are accepted, stored and
reported (docs/configuration.md lists them) — as a Kafka broker stores configs of features a
cluster does not use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from protocol.errors import ErrorCode, KafkaError

from .config import BrokerConfig

# DescribeConfigs config_type (v3+) and config_source values, Kafka's numbering.
TYPE_IDS = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7, "CLASS": 8,
            "PASSWORD": 9}
SOURCE_TOPIC, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 1, 4, 5

INT_MAX, LONG_MAX = 2**31 - 1, 2**63 - 1
_RANGES = {"INT": (-(2**31), INT_MAX), "LONG": (-(2**63), LONG_MAX), "SHORT": (-(2**15), 2**15 - 1)}
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

Check = Callable[[str], str | None]  # the problem with a (type-checked) value, or None


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    type: str
    default: str  # Kafka's default; a broker setting (first synonym) may replace it
    synonyms: tuple[str, ...]  # broker settings that supply the default, most specific first
    doc: str
    acted_on: bool = True
    check: Check | None = None


def at_least(n: float) -> Check:
    return lambda v: None if float(v) >= n else f"Value must be at least {n:g}"


def between(lo: float, hi: float) -> Check:
    return lambda v: None if lo <= float(v) <= hi else f"Value must be no less than {lo:g} and no more than {hi:g}"


def one_of(*values: str) -> Check:
    return lambda v: None if v in values else f"String must be one of: {', '.join(values)}"


def list_of(*values: str) -> Check:
    """A comma-separated list of distinct `values`; empty is allowed (cleanup.policy="" keeps
    everything: no retention, no compaction — Kafka 4 accepts it)."""
    def check(v: str) -> str | None:
        items = [p.strip() for p in v.split(",") if p.strip()]
        bad = [p for p in items if p not in values]
        if bad:
            return f"Invalid value {bad[0]} for configuration: String must be one of: {', '.join(values)}"
        if len(set(items)) != len(items):
            return "Values must not repeat"
        return None
    return check


def _throttled_replicas(v: str) -> str | None:
    """`*`, or partition:broker pairs, as Kafka's ThrottledReplicaListValidator."""
    items = [p.strip() for p in v.split(",") if p.strip()]
    if items == ["*"] or all(len(p.split(":")) == 2 and all(x.strip().isdigit() for x in p.split(":")) for p in items):
        return None
    return "must be the wildcard (*) or a list of partitionId:brokerId pairs"


def _compression_level(lo: int, hi: int, default: int | None = None) -> Check:
    def check(v: str) -> str | None:
        n = int(v)
        if lo <= n <= hi or (default is not None and n == default):
            return None
        return f"Value must be between {lo} and {hi}"
    return check


def _no_tiered_storage(v: str) -> str | None:
    return None if v.lower() == "false" else "Tiered Storage functionality is disabled in the broker"


_WEEK_MS, _DAY_MS = str(7 * 24 * 3600 * 1000), str(24 * 3600 * 1000)

TOPIC_CONFIG_DEFS: tuple[TopicConfigDef, ...] = (
    TopicConfigDef("cleanup.policy", "LIST", "delete", ("log.cleanup.policy",),
                   "delete: old segments go by retention.ms/retention.bytes; compact: keep the latest record per "
                   "key; both; or empty: keep everything", check=list_of("compact", "delete")),
    TopicConfigDef("compression.gzip.level", "INT", "-1", ("compression.gzip.level",),
                   "gzip level used when compression.type is gzip", False, _compression_level(1, 9, -1)),
    TopicConfigDef("compression.lz4.level", "INT", "9", ("compression.lz4.level",),
                   "lz4 level used when compression.type is lz4", False, _compression_level(1, 17)),
    TopicConfigDef("compression.type", "STRING", "producer", ("compression.type",),
                   "codec of stored batches; producer keeps what the producer sent", False,
                   one_of(*COMPRESSION_TYPES)),
    TopicConfigDef("compression.zstd.level", "INT", "3", ("compression.zstd.level",),
                   "zstd level used when compression.type is zstd", False, _compression_level(-131072, 22)),
    TopicConfigDef("delete.retention.ms", "LONG", _DAY_MS, ("log.cleaner.delete.retention.ms",),
                   "how long compaction keeps tombstones and transaction markers", check=at_least(0)),
    TopicConfigDef("file.delete.delay.ms", "LONG", "60000", ("log.segment.delete.delay.ms",),
                   "wait before a deleted segment's files are removed", False, at_least(0)),
    TopicConfigDef("flush.messages", "LONG", str(LONG_MAX), ("log.flush.interval.messages",),
                   "fsync after this many records (1: every batch)", check=at_least(1)),
    TopicConfigDef("flush.ms", "LONG", str(LONG_MAX), ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
                   "fsync when this long has passed since the last one", check=at_least(0)),
    TopicConfigDef("follower.replication.throttled.replicas", "LIST", "", (),
                   "replicas whose fetching is throttled on followers", False, _throttled_replicas),
    TopicConfigDef("index.interval.bytes", "INT", "4096", ("log.index.interval.bytes",),
                   "log bytes between two offset-index entries", check=at_least(0)),
    TopicConfigDef("leader.replication.throttled.replicas", "LIST", "", (),
                   "replicas whose fetching is throttled on the leader", False, _throttled_replicas),
    TopicConfigDef("local.retention.bytes", "LONG", "-2", ("log.local.retention.bytes",),
                   "local part of the log under tiered storage (-2: retention.bytes)", False, at_least(-2)),
    TopicConfigDef("local.retention.ms", "LONG", "-2", ("log.local.retention.ms",),
                   "local part of the log under tiered storage (-2: retention.ms)", False, at_least(-2)),
    TopicConfigDef("max.compaction.lag.ms", "LONG", str(LONG_MAX), ("log.cleaner.max.compaction.lag.ms",),
                   "longest a record stays uncompacted", False, at_least(1)),
    TopicConfigDef("max.message.bytes", "INT", "1048588", ("message.max.bytes",),
                   "largest record batch a producer may append", check=at_least(0)),
    TopicConfigDef("message.timestamp.after.max.ms", "LONG", "3600000", ("log.message.timestamp.after.max.ms",),
                   "how far in the future a CreateTime timestamp may be", False, at_least(0)),
    TopicConfigDef("message.timestamp.before.max.ms", "LONG", str(LONG_MAX),
                   ("log.message.timestamp.before.max.ms",),
                   "how far in the past a CreateTime timestamp may be", False, at_least(0)),
    TopicConfigDef("message.timestamp.type", "STRING", "CreateTime", ("log.message.timestamp.type",),
                   "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's clock",
                   check=one_of("CreateTime", "LogAppendTime")),
    TopicConfigDef("min.cleanable.dirty.ratio", "DOUBLE", "0.5", ("log.cleaner.min.cleanable.ratio",),
                   "share of the log written since the last compaction that triggers the next",
                   check=between(0, 1)),
    TopicConfigDef("min.compaction.lag.ms", "LONG", "0", ("log.cleaner.min.compaction.lag.ms",),
                   "shortest a record stays uncompacted", False, at_least(0)),
    TopicConfigDef("min.insync.replicas", "INT", "1", ("min.insync.replicas",),
                   "acks=all needs at least this many in-sync replicas", check=at_least(1)),
    TopicConfigDef("preallocate", "BOOLEAN", "false", ("log.preallocate",),
                   "create segment files at full size", False),
    TopicConfigDef("remote.log.copy.disable", "BOOLEAN", "false", (),
                   "stop copying segments to tiered storage", False),
    TopicConfigDef("remote.log.delete.on.disable", "BOOLEAN", "false", (),
                   "delete tiered data when tiered storage is turned off", False),
    TopicConfigDef("remote.storage.enable", "BOOLEAN", "false", (),
                   "tiered storage for this topic (not available: only false is accepted)", False,
                   _no_tiered_storage),
    TopicConfigDef("retention.bytes", "LONG", "-1", ("log.retention.bytes",),
                   "delete old segments while a partition is bigger than this (-1: no limit)"),
    TopicConfigDef("retention.ms", "LONG", _WEEK_MS, ("log.retention.ms", "log.retention.minutes",
                                                      "log.retention.hours"),
                   "delete segments whose newest record is older than this (-1: keep)", check=at_least(-1)),
    TopicConfigDef("segment.bytes", "INT", str(1 << 30), ("log.segment.bytes",),
                   "roll to a new segment at this size", check=at_least(14)),
    TopicConfigDef("segment.index.bytes", "INT", str(10 * 1024 * 1024), ("log.index.size.max.bytes",),
                   "size of a segment's offset index; a full index rolls the segment", check=at_least(4)),
    TopicConfigDef("segment.jitter.ms", "LONG", "0", ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                   "random amount taken off segment.ms per segment", False, at_least(0)),
    TopicConfigDef("segment.ms", "LONG", _WEEK_MS, ("log.roll.ms", "log.roll.hours"),
                   "roll to a new segment when the active one is this old", check=at_least(1)),
    TopicConfigDef("unclean.leader.election.enable", "BOOLEAN", "false", ("unclean.leader.election.enable",),
                   "let a replica outside the ISR become leader (losing data)", False),
)
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in TOPIC_CONFIG_DEFS}


def check_value(name: str, value: str) -> None:
    """Parse and validate one topic config as Kafka's ConfigDef would, in its words."""
    d = TOPIC_CONFIGS.get(name)
    if d is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
    v = value.strip()
    try:
        if d.type in _RANGES:
            lo, hi = _RANGES[d.type]
            if not lo <= int(v) <= hi:
                raise ValueError
        elif d.type == "DOUBLE":
            float(v)
        elif d.type == "BOOLEAN" and v.lower() not in ("true", "false"):
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Invalid value {value} for configuration {name}: Expected value to be either true or false")
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"Invalid value {value} for configuration {name}: Not a number of type {d.type}") from None
    problem = d.check(v) if d.check is not None else None
    if problem is not None:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: {problem}")


# ---- the broker resource ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class BrokerEntry:
    name: str
    value: str | None
    type: str
    is_default: bool
    doc: str
    sensitive: bool = False  # a secret: DescribeConfigs says it is set, never its value


# Ketch settings whose values are secrets (Kafka's PASSWORD type)
SENSITIVE = frozenset({"ssl_key_password", "sasl_inter_broker_password", "sasl_plain_users"})

# Ketch setting -> (Kafka's name, type, documentation). Settings Kafka has no name for are
# reported as ketch.<setting>, so nothing the broker runs with is hidden.
_BROKER_NAMES: dict[str, tuple[str, str, str]] = {
    "node_id": ("node.id", "INT", "this broker's id in the cluster"),
    "data_dir": ("log.dir", "STRING", "the one log directory when log.dirs is not set"),
    "metadata_log_dir": ("metadata.log.dir", "STRING", "where the metadata log lives (default: the first log directory)"),
    "cluster_id": ("ketch.cluster.id", "STRING", "the cluster's id, as DescribeCluster and Metadata report it"),
    "rack": ("broker.rack", "STRING", "the rack this broker is in"),
    "auto_create_topics": ("auto.create.topics.enable", "BOOLEAN", "Metadata for an unknown topic creates it"),
    "num_partitions": ("num.partitions", "INT", "partitions of a topic created without a count"),
    "default_replication_factor": ("default.replication.factor", "SHORT", "replicas of a topic created without one"),
    "min_insync_replicas": ("min.insync.replicas", "INT",
                            "in-sync replicas an acks=all write needs, for topics that do not set it"),
    "offsets_topic_num_partitions": ("offsets.topic.num.partitions", "INT", "partitions of __consumer_offsets"),
    "offsets_load_buffer_size": ("offsets.load.buffer.size", "INT",
                                 "bytes of __consumer_offsets read at a time when groups load"),
    "leader_imbalance_check_interval_ms": ("leader.imbalance.check.interval.seconds", "LONG",
                                           "how often partitions go back to their preferred leader (ms here)"),
    "follower_replication_throttled_rate": ("follower.replication.throttled.rate", "LONG",
                                            "bytes/s that throttled replicas fetch, together (-1: no limit)"),
    "replica_alter_log_dirs_io_max_bytes_per_second": ("replica.alter.log.dirs.io.max.bytes.per.second", "LONG",
                                                       "bytes/s that replica moves between log directories copy, "
                                                       "together (-1: no limit)"),
    "replica_lag_time_max_ms": ("replica.lag.time.max.ms", "LONG",
                                "a follower not caught up for this long leaves the ISR"),
    "offsets_topic_replication_factor": ("offsets.topic.replication.factor", "SHORT",
                                         "replicas of each __consumer_offsets partition"),
    "transaction_state_replication_factor": ("transaction.state.log.replication.factor", "SHORT",
                                             "replicas of each __transaction_state partition"),
    "transaction_state_num_partitions": ("transaction.state.log.num.partitions", "INT",
                                         "partitions of __transaction_state"),
    "transaction_state_segment_bytes": ("transaction.state.log.segment.bytes", "INT",
                                        "segment size of __transaction_state"),
    "transaction_max_timeout_ms": ("transaction.max.timeout.ms", "INT", "the longest transaction timeout allowed"),
    "transactional_id_expiration_ms": ("transactional.id.expiration.ms", "INT",
                                       "forget a transactional id idle this long"),
    "transaction_abort_timed_out_interval_ms": ("transaction.abort.timed.out.transaction.cleanup.interval.ms",
                                                "INT", "how often timed-out transactions are looked for"),
    "transaction_two_phase_commit_enable": ("transaction.two.phase.commit.enable", "BOOLEAN",
                                            "producers may ask for two-phase commit (KIP-939): transactions "
                                            "that no timeout aborts"),
    "group_initial_rebalance_delay_ms": ("group.initial.rebalance.delay.ms", "INT",
                                         "wait for more members before a new group's first rebalance"),
    "group_min_session_timeout_ms": ("group.min.session.timeout.ms", "INT", "shortest session timeout allowed"),
    "group_max_session_timeout_ms": ("group.max.session.timeout.ms", "INT", "longest session timeout allowed"),
    "group_max_size": ("group.max.size", "INT", "most members a group may have"),
    "offsets_retention_minutes": ("offsets.retention.minutes", "INT",
                                  "keep an empty group's committed offsets this long"),
    "offsets_retention_check_interval_ms": ("offsets.retention.check.interval.ms", "LONG",
                                            "how often expired offsets are looked for"),
    "offset_metadata_max_bytes": ("offset.metadata.max.bytes", "INT", "largest metadata of a committed offset"),
    "group_consumer_session_timeout_ms": ("group.consumer.session.timeout.ms", "INT",
                                          "a consumer-protocol member silent this long is removed"),
    "group_consumer_heartbeat_interval_ms": ("group.consumer.heartbeat.interval.ms", "INT",
                                             "how often consumer-protocol members heartbeat"),
    "group_consumer_assignors": ("group.consumer.assignors", "LIST",
                                 "server assignors of consumer-protocol groups; the first is the default"),
    "group_consumer_migration_policy": ("group.consumer.migration.policy", "STRING",
                                        "may a group with members change protocol: disabled, upgrade, downgrade, "
                                        "bidirectional"),
    "group_share_session_timeout_ms": ("group.share.session.timeout.ms", "INT",
                                       "a share-group member silent this long is removed"),
    "group_share_heartbeat_interval_ms": ("group.share.heartbeat.interval.ms", "INT",
                                          "how often share-group members heartbeat"),
    "group_share_record_lock_duration_ms": ("group.share.record.lock.duration.ms", "INT",
                                            "how long a share-group member holds the records it acquired"),
    "group_share_delivery_count_limit": ("group.share.delivery.count.limit", "INT",
                                         "deliveries of a record to share-group members before it is archived"),
    "group_share_partition_max_record_locks": ("group.share.partition.max.record.locks", "INT",
                                               "in-flight records of one share-partition at most"),
    "share_auto_offset_reset": ("share.auto.offset.reset", "STRING",
                                "where a new share-partition starts: latest or earliest"),
    "share_isolation_level": ("share.isolation.level", "STRING",
                              "read_committed: share groups deliver committed records only"),
    "share_coordinator_state_topic_num_partitions": ("share.coordinator.state.topic.num.partitions", "INT",
                                                     "partitions of __share_group_state"),
    "share_coordinator_state_topic_replication_factor": ("share.coordinator.state.topic.replication.factor",
                                                         "SHORT", "replication factor of __share_group_state"),
    "socket_request_max_bytes": ("socket.request.max.bytes", "INT", "largest request accepted"),
    "max_pipelined_requests": ("ketch.max.pipelined.requests", "INT",
                               "requests read ahead on one connection before reading pauses"),
    "max_connections": ("max.connections", "INT", "client connections a broker takes at most (brokers' own "
                        "listeners exempt); one more is closed at once"),
    "max_connections_per_ip": ("max.connections.per.ip", "INT", "client connections one address may open"),
    "max_connections_per_ip_overrides": ("max.connections.per.ip.overrides", "STRING",
                                         "per-address caps: ip:count,ip:count"),
    "queued_max_request_bytes": ("queued.max.request.bytes", "LONG",
                                 "request bytes all client connections may hold unanswered; past it the "
                                 "broker stops reading until answers free memory"),
    "connection_max_request_bytes": ("ketch.connection.max.request.bytes", "LONG",
                                     "request bytes one connection may hold unanswered (one larger request "
                                     "is admitted alone)"),
    "connections_max_idle_ms": ("connections.max.idle.ms", "LONG", "close a connection silent this long"),
    "max_incremental_fetch_session_cache_slots": ("max.incremental.fetch.session.cache.slots", "INT",
                                                  "fetch sessions (KIP-227) the broker keeps at most"),
    "log_retention_check_interval_ms": ("log.retention.check.interval.ms", "LONG",
                                        "how often retention is applied"),
    "log_checkpoint_interval_ms": ("log.flush.offset.checkpoint.interval.ms", "INT",
                                   "how often recovery points are checkpointed"),
    "producer_id_expiration_ms": ("producer.id.expiration.ms", "INT", "forget an idle idempotent producer"),
    "producer_id_expiration_check_interval_ms": ("producer.id.expiration.check.interval.ms", "INT",
                                                 "how often idle producers are looked for"),
    "metrics_listen": ("ketch.metrics.listen", "STRING", "HOST:PORT of the Prometheus /metrics endpoint"),
    "voters": ("controller.quorum.voters", "LIST", "the metadata quorum's voters: id@host:port of their controller listeners"),
    "controller_listen": ("ketch.controller.listen", "STRING", "the controller listener of a node that is the only voter"),
    "broker_heartbeat_interval_ms": ("broker.heartbeat.interval.ms", "INT", "how often a broker heartbeats"),
    "broker_session_timeout_ms": ("broker.session.timeout.ms", "INT",
                                  "a broker not heard from this long is fenced"),
    "metadata_snapshot_records": ("ketch.metadata.snapshot.records", "INT",
                                  "snapshot the metadata image every this many records"),
    "listener_security_protocol_map": ("listener.security.protocol.map", "STRING",
                                       "each listener's security protocol (docs/security.md)"),
    "controller_listener_names": ("controller.listener.names", "STRING", "the controller listener's name"),
    "ssl_keystore_location": ("ssl.keystore.location", "STRING", "PEM: this broker's certificate chain (and key)"),
    "ssl_key_location": ("ketch.ssl.key.location", "STRING", "PEM: this broker's private key, if not in the keystore"),
    "ssl_key_password": ("ssl.key.password", "PASSWORD", "the private key's password"),
    "ssl_truststore_location": ("ssl.truststore.location", "STRING", "PEM: the CA certificates peers are checked against"),
    "ssl_client_auth": ("ssl.client.auth", "STRING", "none, requested or required client certificates"),
    "ssl_endpoint_identification_algorithm": ("ssl.endpoint.identification.algorithm", "STRING",
                                              "https: check other brokers' host names"),
    "sasl_enabled_mechanisms": ("sasl.enabled.mechanisms", "LIST", "the SASL mechanisms offered"),
    "sasl_plain_users": ("ketch.sasl.plain.users", "PASSWORD", "PLAIN users, NAME:PASSWORD"),
    "sasl_plain_users_file": ("ketch.sasl.plain.users.file", "STRING", "a file of PLAIN users, NAME:PASSWORD a line"),
    "sasl_mechanism_inter_broker_protocol": ("sasl.mechanism.inter.broker.protocol", "STRING",
                                             "the mechanism brokers log in to each other with"),
    "sasl_mechanism_controller_protocol": ("sasl.mechanism.controller.protocol", "STRING",
                                           "the mechanism brokers log in to the controllers with"),
    "sasl_inter_broker_username": ("ketch.sasl.inter.broker.username", "STRING", "this broker's SASL login"),
    "sasl_inter_broker_password": ("ketch.sasl.inter.broker.password", "PASSWORD", "this broker's SASL password"),
    "super_users": ("super.users", "STRING", "principals allowed everything and trusted as brokers (User:NAME;...)"),
    "connection_failed_authentication_delay_ms": ("connection.failed.authentication.delay.ms", "INT",
                                                  "delay before a failed login is answered and closed"),
    "log_format": ("ketch.log.format", "STRING", "auto, json or console"),
    "log_level": ("ketch.log.level", "STRING", "the broker's log level"),
}


def _hp(advertised: tuple[str, int] | None, host: str, port: int) -> str:
    h, p = advertised or ((host if host not in ("", "0.0.0.0", "::") else "localhost"), port)
    return f"{h}:{p}"


def broker_entries(cfg: BrokerConfig, defaults: BrokerConfig, advertised: str, inter_broker: str,
                   topic_defaults: dict[str, tuple[str, str]]) -> list[BrokerEntry]:
    """What a broker resource of DescribeConfigs lists: listeners in Kafka's form, every setting
    under Kafka's name, and the broker-level synonyms of the topic configs (log.retention.ms, ...)."""
    from .security.listeners import plan  # noqa: PLC0415 - security imports config, which this module serves

    listeners = plan(cfg)
    bound = ",".join(f"{s.name}://{s.host}:{s.port}" for s in (*listeners.clients, listeners.inter_broker))
    adv_clients = [f"{s.name}://{advertised}" if i == 0 and not cfg.listeners
                   else f"{s.name}://{_hp(s.advertised, s.host, s.port)}" for i, s in enumerate(listeners.clients)]
    ib = listeners.inter_broker
    out = [
        BrokerEntry("listeners", bound, "LIST", not cfg.listeners,
                    "where the broker listens: its client listeners, then the inter-broker one"),
        BrokerEntry("advertised.listeners", ",".join([*adv_clients, f"{ib.name}://{inter_broker}"]), "LIST",
                    not cfg.advertised_listeners, "the addresses given to clients and brokers"),
        BrokerEntry("inter.broker.listener.name", ib.name, "STRING", cfg.inter_broker_listener_name == "BROKER",
                    "the listener brokers use (WriteTxnMarkers is served only there)"),
        BrokerEntry("broker.id", str(cfg.node_id), "INT", False, "same as node.id"),
        BrokerEntry("process.roles", "broker", "LIST", False, "the roles this process runs"),
        BrokerEntry("log.dirs", ",".join(cfg.log_dir_paths), "STRING", not cfg.log_dirs,
                    "the log directories; new partitions go to the one holding the fewest"),
    ]
    for attr, (name, type_, doc) in _BROKER_NAMES.items():
        v = getattr(cfg, attr)
        is_default = v == getattr(defaults, attr)
        if attr == "metadata_log_dir" and not v:
            v = None  # unset, as Kafka reports it (the first log directory is used)
        value = None if v is None else (str(v).lower() if isinstance(v, bool) else str(v))
        if attr in SENSITIVE:
            out.append(BrokerEntry(name, None, type_, is_default, doc, sensitive=True))
            continue
        out.append(BrokerEntry(name, value, type_, is_default, doc))
    for d in TOPIC_CONFIG_DEFS:
        if not d.synonyms:
            continue
        name = d.synonyms[0]
        if name in {e.name for e in out}:
            continue
        override = topic_defaults.get(d.name)
        out.append(BrokerEntry(name, override[1] if override else d.default, d.type, override is None,
                               f"default of the topic config {d.name}: {d.doc}"))
    return sorted(out, key=lambda e: e.name)
