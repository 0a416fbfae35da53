"""Broker settings: defaults, then a TOML file, then KETCH_* environment variables, then flags.

One flat namespace so that a setting has one name everywhere: `flush_messages` in the file,
KETCH_FLUSH_MESSAGES in the environment, `--flush-messages` is not needed as a flag because the
environment covers scripted use; only the handful a person types often get flags.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .admission import Limits, parse_ip_overrides

ENV_PREFIX = "KETCH_"
LOG_FORMATS = ("auto", "json", "console")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class ConfigError(ValueError):
    """A setting the broker cannot start with, worded as Kafka's ConfigException words it: the
    value, the setting, what is wrong. The CLI prints it as one line and exits non-zero."""

    def __init__(self, name: str, value: object, problem: str, source: str = "") -> None:
        where = f" (from {source})" if source else ""
        super().__init__(f"Invalid value {value!r} for configuration {name}{where}: {problem}")
        self.name = name


def parse_voters(value: str) -> dict[int, tuple[str, int]]:
    """ "1@host:port,2@host:port" -> {1: (host, port), 2: ...}; a ConfigError for anything else."""
    out: dict[int, tuple[str, int]] = {}
    for part in (p.strip() for p in value.split(",") if p.strip()):
        node, at, hostport = part.partition("@")
        if not at or not node.isdigit():
            raise ConfigError("voters", value, f"{part!r} is not NODE_ID@HOST:PORT")
        if int(node) in out:
            raise ConfigError("voters", value, f"node {node} is named twice")
        out[int(node)] = parse_host_port("voters", hostport)
    return out


def parse_host_port(name: str, value: str, source: str = "") -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep:
        raise ConfigError(name, value, "expected HOST:PORT", source)
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(name, value, "the port must be a number from 0 to 65535", source)
    return host, int(port)


@dataclass
class BrokerConfig:
    node_id: int = 1
    listen: str = "0.0.0.0:9092"
    advertise: str | None = None  # host:port given to clients; defaults to listen (0.0.0.0 -> localhost)
    # Brokers' own listener (marker sender, and replication later): WriteTxnMarkers and the
    # broker form of AddPartitionsToTxn are served only here. Port 0: any free port.
    inter_broker_listen: str = "127.0.0.1:0"
    inter_broker_advertise: str | None = None
    metrics_listen: str = ""  # host:port of the Prometheus /metrics endpoint; empty: no endpoint
    # The metadata quorum (docs/cluster.md). `voters`: "1@host:port,2@host:port,..." — the voters'
    # controller listeners; empty: this node alone is the quorum, its controller listener on
    # `controller_listen` (port 0: any free port).
    controller_listen: str = "127.0.0.1:0"
    voters: str = ""
    # Security (docs/security.md). Kafka's listener settings: when `listeners` is set it names every
    # listener (NAME://HOST:PORT,...) and `listen` is not used; the map gives each name its security
    # protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; BROKER and CONTROLLER are PLAINTEXT unless
    # mapped). broker/security/listeners.py says how they combine with the settings above, and
    # broker/security/settings.py checks them all when the broker starts (BrokerServer).
    listeners: str = ""
    advertised_listeners: str = ""
    listener_security_protocol_map: str = ""
    inter_broker_listener_name: str = "BROKER"
    controller_listener_names: str = "CONTROLLER"
    # TLS (SSL and SASL_SSL listeners, and the broker's own connections to them): PEM files.
    ssl_keystore_location: str = ""  # this broker's certificate chain, and its key unless ssl_key_location
    ssl_key_location: str = ""
    ssl_key_password: str = ""
    ssl_truststore_location: str = ""  # the CA certificates peers' certificates are checked against
    ssl_client_auth: str = "none"  # Kafka's ssl.client.auth: none | requested | required (mTLS)
    ssl_endpoint_identification_algorithm: str = "https"  # "https": check the peer broker's host name; "": not
    # SASL: the mechanisms offered, the PLAIN users (Kafka's JAAS user_NAME="PASSWORD"), and what
    # this broker logs in with to other brokers' and the controllers' SASL listeners.
    sasl_enabled_mechanisms: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    sasl_plain_users: str = ""  # NAME:PASSWORD,...
    sasl_plain_users_file: str = ""  # a file of NAME:PASSWORD lines
    sasl_mechanism_inter_broker_protocol: str = "PLAIN"
    sasl_mechanism_controller_protocol: str = "PLAIN"
    sasl_inter_broker_username: str = ""
    sasl_inter_broker_password: str = ""
    # Kafka's super.users ("User:NAME;User:NAME"): allowed everything by the authorizer, and on a
    # secured inter-broker or controller listener the only ones that may send what brokers send
    # (markers, replica fetches, votes, ...).
    super_users: str = ""
    connection_failed_authentication_delay_ms: int = 100  # before a failed login's answer and close
    metadata_snapshot_records: int = 1000  # snapshot the metadata image every this many records
    broker_heartbeat_interval_ms: int = 2000  # Kafka's broker.heartbeat.interval.ms
    broker_session_timeout_ms: int = 9000  # Kafka's broker.session.timeout.ms: fenced after this silence
    data_dir: str = "./data"  # Kafka's log.dir: the one log directory when log_dirs is empty
    # Kafka's log.dirs: several log directories, comma-separated; when set, data_dir is not used.
    # New partitions go to the one holding the fewest (docs/storage.md "Several log directories").
    log_dirs: str = ""
    metadata_log_dir: str = ""  # Kafka's metadata.log.dir: the metadata log's place; default the first log dir
    cluster_id: str = "ketch-cluster"
    rack: str | None = None

    auto_create_topics: bool = True
    num_partitions: int = 1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1  # Kafka's broker default for topics that do not set min.insync.replicas
    offsets_topic_num_partitions: int = 50
    # Kafka's offsets.load.buffer.size: bytes of `__consumer_offsets` read (and decoded off the
    # loop) at a time when a partition's groups load
    offsets_load_buffer_size: int = 5 * 1024 * 1024
    transaction_state_num_partitions: int = 50
    leader_imbalance_check_interval_ms: int = 300000  # Kafka's leader.imbalance.check.interval.seconds
    replica_lag_time_max_ms: int = 30000  # Kafka's replica.lag.time.max.ms: out of the ISR after this behind
    # Bytes/s this broker may fetch, all together, for replicas a reassignment is adding here or a
    # topic lists in follower.replication.throttled.replicas (docs/cluster.md); -1: no limit.
    follower_replication_throttled_rate: int = -1
    # Bytes/s the copies of AlterReplicaLogDirs moves may take, all together (broker/partition/move.py);
    # -1: no limit (Kafka's default is Long.MAX_VALUE).
    replica_alter_log_dirs_io_max_bytes_per_second: int = -1
    # Kafka's default is 3; Ketch takes at most the voters, so one broker needs no setting
    offsets_topic_replication_factor: int = 3
    transaction_state_replication_factor: int = 3
    transaction_state_segment_bytes: int = 100 * 1024 * 1024  # Kafka's transaction.state.log.segment.bytes
    transaction_max_timeout_ms: int = 900_000  # InitProducerId asking for more: INVALID_TRANSACTION_TIMEOUT
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    transaction_abort_timed_out_interval_ms: int = 10_000  # how often the reaper looks
    # Kafka's transaction.two.phase.commit.enable: may producers ask for 2PC (KIP-939, InitProducerId
    # with Enable2Pc)? A prepared transaction holds back the LSO of its partitions until someone
    # ends it (docs/transactions.md), so it is off unless an operator allows it.
    transaction_two_phase_commit_enable: bool = False
    # consumer groups (docs/groups.md)
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = 2_147_483_647  # Kafka's group.max.size: joins past it get GROUP_MAX_SIZE_REACHED
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    # KIP-848 consumer groups (ConsumerGroupHeartbeat): the broker sets their session and heartbeat
    # interval, and computes their assignments with the first of these assignors a member asks for
    group_consumer_session_timeout_ms: int = 45000
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_assignors: str = "uniform,range"
    # may a group with members change protocol (KIP-848's online upgrade/downgrade): disabled,
    # upgrade, downgrade or bidirectional (Kafka 4's default)
    group_consumer_migration_policy: str = "bidirectional"
    # KIP-932 share groups (docs/groups.md): members' session and heartbeat, the share-partitions'
    # acquisition locks, delivery limit and in-flight window, and (group configs in Kafka, broker-wide
    # here) where a new share-partition starts and which records it delivers
    group_share_session_timeout_ms: int = 45000
    group_share_heartbeat_interval_ms: int = 5000
    group_share_record_lock_duration_ms: int = 30000
    group_share_delivery_count_limit: int = 5
    group_share_partition_max_record_locks: int = 2000
    share_auto_offset_reset: str = "latest"
    share_isolation_level: str = "read_uncommitted"
    # `__share_group_state`, where the share coordinator keeps the share-partitions' state
    share_coordinator_state_topic_num_partitions: int = 50
    share_coordinator_state_topic_replication_factor: int = 3

    message_max_bytes: int = 1048588
    socket_request_max_bytes: int = 100 * 1024 * 1024
    max_pipelined_requests: int = 128
    max_incremental_fetch_session_cache_slots: int = 1000  # fetch sessions kept (broker/fetch_session.py)
    # The front door (broker/admission.py, docs/security.md): Kafka's connection caps (brokers'
    # own listeners exempt), the request memory pool and one connection's share of it, idleness.
    max_connections: int = 2**31 - 1
    max_connections_per_ip: int = 2**31 - 1
    max_connections_per_ip_overrides: str = ""  # "ip:count,ip:count"
    queued_max_request_bytes: int = 512 * 1024 * 1024
    connection_max_request_bytes: int = 64 * 1024 * 1024
    connections_max_idle_ms: int = 600_000

    log_segment_bytes: int = 1024 * 1024 * 1024
    log_segment_ms: int = 7 * 24 * 3600 * 1000
    log_retention_ms: int = 7 * 24 * 3600 * 1000
    log_retention_bytes: int = -1
    log_retention_check_interval_ms: int = 5 * 60 * 1000
    log_checkpoint_interval_ms: int = 60 * 1000
    flush_messages: int | None = None  # 1 = fsync after every batch
    flush_ms: int | None = None
    producer_id_expiration_ms: int = 24 * 3600 * 1000
    producer_id_expiration_check_interval_ms: int = 10 * 60 * 1000  # Kafka's default

    # Authorization (docs/security.md): Kafka's authorizer.class.name as on/off. Off, every request
    # is allowed (as before); on, each is checked against the ACLs in the metadata log.
    authorizer: bool = False
    allow_everyone_if_no_acl_found: bool = False  # Kafka's default: a resource without ACLs is denied

    log_format: str = "auto"  # auto | json | console
    log_level: str = "info"

    def voter_map(self) -> dict[int, tuple[str, int]]:
        return parse_voters(self.voters) if self.voters else {}

    def validate(self) -> BrokerConfig:
        """Refuse what the broker could not run with, before anything touches the data directory."""
        parse_host_port("listen", self.listen)
        if self.advertise:
            parse_host_port("advertise", self.advertise)
        parse_host_port("inter_broker_listen", self.inter_broker_listen)
        if self.inter_broker_advertise:
            parse_host_port("inter_broker_advertise", self.inter_broker_advertise)
        if self.metrics_listen:
            parse_host_port("metrics_listen", self.metrics_listen)
        parse_host_port("controller_listen", self.controller_listen)
        voters = self.voter_map()
        if voters and self.node_id not in voters:
            raise ConfigError("voters", self.voters, f"node {self.node_id} is not one of the voters "
                              f"{sorted(voters)} (observers are not supported yet)")
        if self.node_id < 0:
            raise ConfigError("node_id", self.node_id, "must be at least 0")
        if not self.data_dir:
            raise ConfigError("data_dir", self.data_dir, "must name a directory")
        self._check_log_dirs()
        unlimited = ("log_retention_ms", "log_retention_bytes")  # -1: no limit, as in Kafka
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, int) or isinstance(v, bool) or f.name in unlimited:
                continue
            if f.name.endswith(("_bytes", "_partitions", "_size", "_requests", "_records")) and v < 1:
                raise ConfigError(f.name, v, "must be at least 1")
            if f.name.endswith(("_ms", "_minutes")) and v < 0:
                raise ConfigError(f.name, v, "must not be negative")
        for name in ("max_connections", "max_connections_per_ip"):
            if getattr(self, name) < 0:
                raise ConfigError(name, getattr(self, name), "must not be negative")
        try:
            parse_ip_overrides(self.max_connections_per_ip_overrides)
        except ValueError as e:
            raise ConfigError("max_connections_per_ip_overrides", self.max_connections_per_ip_overrides,
                              str(e)) from None
        if self.num_partitions < 1:
            raise ConfigError("num_partitions", self.num_partitions, "must be at least 1")
        if self.flush_messages is not None and self.flush_messages < 1:
            raise ConfigError("flush_messages", self.flush_messages, "must be at least 1")
        assignors = [a.strip() for a in self.group_consumer_assignors.split(",") if a.strip()]
        if not assignors or any(a not in ("uniform", "range") for a in assignors):
            raise ConfigError("group_consumer_assignors", self.group_consumer_assignors,
                              "must list uniform and/or range, comma-separated")
        if self.group_consumer_migration_policy not in ("disabled", "upgrade", "downgrade", "bidirectional"):
            raise ConfigError("group_consumer_migration_policy", self.group_consumer_migration_policy,
                              "must be disabled, upgrade, downgrade or bidirectional")
        if self.share_auto_offset_reset not in ("latest", "earliest"):
            raise ConfigError("share_auto_offset_reset", self.share_auto_offset_reset, "must be latest or earliest")
        if self.share_isolation_level not in ("read_uncommitted", "read_committed"):
            raise ConfigError("share_isolation_level", self.share_isolation_level,
                              "must be read_uncommitted or read_committed")
        if not 2 <= self.group_share_delivery_count_limit <= 10:  # Kafka's bounds
            raise ConfigError("group_share_delivery_count_limit", self.group_share_delivery_count_limit,
                              "must be from 2 to 10")
        for p in (p.strip() for p in self.super_users.split(";") if p.strip()):
            kind, sep, name = p.partition(":")
            if not sep or not kind or not name:
                raise ConfigError("super_users", self.super_users, f"{p!r} is not a principal TYPE:NAME (User:admin)")
        if self.log_format not in LOG_FORMATS:
            raise ConfigError("log_format", self.log_format, f"must be one of {', '.join(LOG_FORMATS)}")
        if self.log_level.lower() not in LOG_LEVELS:
            raise ConfigError("log_level", self.log_level, f"must be one of {', '.join(LOG_LEVELS)}")
        return self

    def front_door(self) -> Limits:
        """The connection caps, request memory and idle timeout (broker/admission.py)."""
        return Limits(self.max_connections, self.max_connections_per_ip,
                      parse_ip_overrides(self.max_connections_per_ip_overrides), self.queued_max_request_bytes,
                      self.connection_max_request_bytes, self.connections_max_idle_ms)

    @property
    def log_dir_paths(self) -> list[str]:
        """The log directories in the order given: log_dirs if set (Kafka: log.dirs over log.dir)."""
        listed = [p.strip() for p in self.log_dirs.split(",") if p.strip()]
        return listed or [self.data_dir]

    @property
    def metadata_dir(self) -> str:
        """Where the metadata log, meta.properties' first copy and the broker's own files live."""
        return self.metadata_log_dir or self.log_dir_paths[0]

    def _check_log_dirs(self) -> None:
        """Two names for one directory, or one inside another, would have two log directories
        claim the same partition directories (Kafka refuses duplicates the same way)."""
        seen: list[tuple[str, Path]] = []
        for path in self.log_dir_paths:
            resolved = Path(os.path.abspath(path))
            for other, other_resolved in seen:
                if resolved == other_resolved:
                    raise ConfigError("log_dirs", self.log_dirs, f"{path!r} and {other!r} name one directory twice")
                if other_resolved in resolved.parents or resolved in other_resolved.parents:
                    raise ConfigError("log_dirs", self.log_dirs, f"{path!r} and {other!r} are nested")
            seen.append((path, resolved))

    @property
    def listen_host(self) -> str:
        return parse_host_port("listen", self.listen)[0] or "0.0.0.0"

    @property
    def listen_port(self) -> int:
        return parse_host_port("listen", self.listen)[1]

    @property
    def advertised_host_port(self) -> tuple[str, int]:
        if self.advertise:
            return parse_host_port("advertise", self.advertise)
        host = self.listen_host
        if host in ("0.0.0.0", "::", ""):
            host = "localhost"
        return host, self.listen_port


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _coerce(name: str, value: Any, typ: Any, source: str) -> Any:
    """A value from a file or the environment as the setting's type, or a ConfigError."""
    t = str(typ)
    if "bool" in t:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise ConfigError(name, value, "expected true or false", source)
    if "int" in t:
        if isinstance(value, bool):
            raise ConfigError(name, value, "expected a whole number", source)
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if "None" in t and text.lower() in ("", "none", "null"):
            return None
        try:
            return int(text)
        except ValueError:
            raise ConfigError(name, value, "expected a whole number", source) from None
    if "str" in t:
        if not isinstance(value, str):
            raise ConfigError(name, value, "expected a string", source)
        return value
    return value


def load_config(file: str | Path | None = None, env: dict[str, str] | None = None,
                overrides: dict[str, Any] | None = None) -> BrokerConfig:
    fields = {f.name: f for f in dataclasses.fields(BrokerConfig)}
    values: dict[str, Any] = {}
    if file:
        try:
            with open(file, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as e:
            raise ConfigError("config", str(file), f"cannot read the file: {e.strerror}") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError("config", str(file), f"not valid TOML: {e}") from None
        for k, v in data.items():
            key = k.replace(".", "_").replace("-", "_")
            if key not in fields:
                raise ConfigError(k, v, "unknown setting (docs/configuration.md lists them)", str(file))
            values[key] = _coerce(key, v, fields[key].type, str(file))
    for k, v in (os.environ if env is None else env).items():
        if k.startswith(ENV_PREFIX):
            key = k[len(ENV_PREFIX):].lower()
            if key in fields:
                values[key] = _coerce(key, v, fields[key].type, k)
    for k, v in (overrides or {}).items():
        if v is not None:
            values[k] = v
    return BrokerConfig(**values).validate()
