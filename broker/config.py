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

ENV_PREFIX = "KETCH_"


@dataclass
class BrokerConfig:
    node_id: int = 1
    listen: str = "0.0.0.0:9092"
    advertise: str | None = None  # host:port given to clients; defaults to listen (0.0.0.0 -> localhost)
    metrics_listen: str = ""  # host:port of the Prometheus /metrics endpoint; empty: no endpoint
    data_dir: str = "./data"
    cluster_id: str = "ketch-cluster"
    rack: str | None = None

    auto_create_topics: bool = True
    num_partitions: int = 1
    default_replication_factor: int = 1
    offsets_topic_num_partitions: int = 50
    transaction_state_num_partitions: int = 50
    transaction_state_segment_bytes: int = 100 * 1024 * 1024  # Kafka's transaction.state.log.segment.bytes
    transaction_max_timeout_ms: int = 900_000  # InitProducerId asking for more: INVALID_TRANSACTION_TIMEOUT
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    transaction_abort_timed_out_interval_ms: int = 10_000  # how often the reaper looks
    # consumer groups (docs/groups.md)
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = 2_147_483_647  # Kafka's group.max.size: joins past it get GROUP_MAX_SIZE_REACHED
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096

    message_max_bytes: int = 1048588
    socket_request_max_bytes: int = 100 * 1024 * 1024
    max_pipelined_requests: int = 128

    log_segment_bytes: int = 1024 * 1024 * 1024
    log_segment_ms: int = 7 * 24 * 3600 * 1000
    log_retention_ms: int = 7 * 24 * 3600 * 1000
    log_retention_bytes: int = -1
    log_retention_check_interval_ms: int = 5 * 60 * 1000
    log_checkpoint_interval_ms: int = 60 * 1000
    flush_messages: int | None = None  # 1 = fsync after every batch
    flush_ms: int | None = None
    producer_id_expiration_ms: int = 24 * 3600 * 1000

    log_format: str = "auto"  # auto | json | console
    log_level: str = "info"

    @property
    def listen_host(self) -> str:
        return self.listen.rsplit(":", 1)[0] or "0.0.0.0"

    @property
    def listen_port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])

    @property
    def advertised_host_port(self) -> tuple[str, int]:
        if self.advertise:
            host, port = self.advertise.rsplit(":", 1)
            return host, int(port)
        host = self.listen_host
        if host in ("0.0.0.0", "::", ""):
            host = "localhost"
        return host, self.listen_port


def _coerce(value: str, typ: Any) -> Any:
    t = str(typ)
    if "bool" in t:
        return value.strip().lower() in ("1", "true", "yes", "on")
    if "int" in t:
        if value.strip().lower() in ("", "none", "null"):
            return None
        return int(value)
    return value


def load_config(file: str | Path | None = None, env: dict[str, str] | None = None,
                overrides: dict[str, Any] | None = None) -> BrokerConfig:
    fields = {f.name: f for f in dataclasses.fields(BrokerConfig)}
    values: dict[str, Any] = {}
    if file:
        with open(file, "rb") as fh:
            data = tomllib.load(fh)
        for k, v in data.items():
            key = k.replace(".", "_").replace("-", "_")
            if key not in fields:
                raise ValueError(f"unknown setting {k!r} in {file}")
            values[key] = v
    for k, v in (os.environ if env is None else env).items():
        if k.startswith(ENV_PREFIX):
            key = k[len(ENV_PREFIX):].lower()
            if key in fields:
                values[key] = _coerce(v, fields[key].type)
    for k, v in (overrides or {}).items():
        if v is not None:
            values[k] = v
    return BrokerConfig(**values)
