"""The topics this broker holds: names, ids, partition counts, per-topic config, on-disk logs.

Until the metadata quorum exists (docs/architecture.md §5) the topic table is a JSON file in the data
directory, rewritten atomically on every change; the logs are the partitions' own directories.
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from protocol.errors import ErrorCode, KafkaError
from storage.checkpoint import atomic_write
from storage.clock import Clock
from storage.config import LogConfig

from .config import BrokerConfig, ConfigError
from .config_catalog import TOPIC_CONFIGS, check_value
from .group_commit import GroupCommit
from .partition import Partition
from .quorum.wire_codec import METADATA_TOPIC
from .replication.replica_state import Assignment

log = structlog.get_logger()

LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LEN = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# 2: the internal topics hold Kafka's records (OffsetCommitKey/Value, TransactionLogKey/Value, ...).
TOPICS_FILE_VERSION = 2

MAX_PARTITIONS = 100_000


def validate_topic_name(name: str | None) -> None:
    if not name or name in (".", "..") or len(name) > MAX_TOPIC_LEN or not LEGAL_TOPIC.match(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic name {name!r} must be 1-249 chars of [a-zA-Z0-9._-], not '.' or '..'")


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[Partition] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class TopicTable:
    """Creates, finds, loads and deletes topics and their partition logs."""

    def __init__(self, cfg: BrokerConfig, clock: Clock) -> None:
        self.cfg = cfg
        self.clock = clock
        self.data_dir = Path(cfg.data_dir)
        self.meta_file = self.data_dir / "topics.json"
        self.by_name: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self.group_commit = GroupCommit()  # shared by every partition: one fsync per log per loop turn

    def broker_defaults(self) -> dict[str, tuple[str, str]]:
        """Topic configs whose default comes from a broker setting that differs from Kafka's
        default: topic config -> (Kafka's name of the broker setting, value). DescribeConfigs
        reports these as STATIC_BROKER_CONFIG, the rest as DEFAULT_CONFIG."""
        c = self.cfg
        derived = {
            "retention.ms": ("log.retention.ms", c.log_retention_ms),
            "retention.bytes": ("log.retention.bytes", c.log_retention_bytes),
            "segment.bytes": ("log.segment.bytes", c.log_segment_bytes),
            "segment.ms": ("log.roll.ms", c.log_segment_ms),
            "max.message.bytes": ("message.max.bytes", c.message_max_bytes),
            "flush.messages": ("log.flush.interval.messages", c.flush_messages),
            "flush.ms": ("log.flush.interval.ms", c.flush_ms),
        }
        return {k: (name, str(v)) for k, (name, v) in derived.items()
                if v is not None and str(v) != TOPIC_CONFIGS[k].default}

    def effective_configs(self, configs: Mapping[str, str]) -> dict[str, str]:
        """Every topic config: the topic's override, else the broker's setting, else Kafka's default."""
        out = {name: d.default for name, d in TOPIC_CONFIGS.items()}
        out.update({k: v for k, (_, v) in self.broker_defaults().items()})
        out.update(configs)
        return out

    def log_config(self, configs: Mapping[str, str]) -> LogConfig:
        e = self.effective_configs(configs)
        big = 9223372036854775807
        flush_messages = int(e["flush.messages"])
        flush_ms = int(e["flush.ms"])
        return LogConfig(
            segment_bytes=int(e["segment.bytes"]),
            segment_ms=int(e["segment.ms"]),
            retention_ms=int(e["retention.ms"]),
            retention_bytes=int(e["retention.bytes"]),
            index_interval_bytes=int(e["index.interval.bytes"]),
            max_index_size=int(e["segment.index.bytes"]),
            flush_messages=None if flush_messages >= big else flush_messages,
            flush_ms=None if flush_ms >= big else flush_ms,
            cleanup_policy=",".join(p.strip() for p in e["cleanup.policy"].split(",") if p.strip()),
            message_timestamp_type=e["message.timestamp.type"],  # type: ignore[arg-type]
            delete_retention_ms=int(e["delete.retention.ms"]),
            min_cleanable_dirty_ratio=float(e["min.cleanable.dirty.ratio"]),
            producer_id_expiration_ms=self.cfg.producer_id_expiration_ms,
            max_message_bytes=int(e["max.message.bytes"]),
            min_insync_replicas=int(e["min.insync.replicas"]),
        )

    def _open_partition(self, topic: str, index: int, config: LogConfig) -> Partition:
        """Open a partition's log and lead it: one broker is every partition's only replica and
        its whole ISR (the cluster's metadata will hand leadership out instead)."""
        node = self.cfg.node_id
        p = Partition.open(self.data_dir, topic, index, config, node, self.clock.now_ms, self.group_commit)
        p.become_leader(Assignment((node,), frozenset({node}), node, 0, 0))
        return p

    # ---- persistence -------------------------------------------------------------------------
    def load(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.meta_file.exists():
            return
        data = json.loads(self.meta_file.read_text())
        self._refuse_old_internal_layout(data)
        for t in data["topics"]:
            topic = Topic(t["name"], uuid.UUID(t["id"]), configs=t.get("configs", {}))
            lc = self.log_config(topic.configs)
            topic.partitions = [self._open_partition(topic.name, i, lc) for i in range(t["partitions"])]
            self._index(topic)
        self._remove_orphans()
        log.info("topics loaded", topics=len(self.by_name),
                 partitions=sum(len(t.partitions) for t in self.by_name.values()))

    def _refuse_old_internal_layout(self, data: dict[str, Any]) -> None:
        """Before version 2 of topics.json, `__consumer_offsets` and `__transaction_state` held
        records in a layout of Ketch's own. Read as Kafka's records they would be misread (an
        old offset value v0 parses as Kafka's v0 with other fields), so refuse to start."""
        if data.get("version", 1) >= TOPICS_FILE_VERSION:
            return
        for t in data["topics"]:
            if t["name"] in INTERNAL_TOPICS:
                raise ConfigError(
                    "data_dir", str(self.data_dir),
                    f"topic {t['name']} holds records in the layout of Ketch before Kafka's internal-topic "
                    "formats (docs/transactions.md); start with an empty data directory, or delete the "
                    f"{t['name']}-* directories and its entry in topics.json to drop committed offsets "
                    "and transaction state")

    def _remove_orphans(self) -> None:
        """Delete partition directories topics.json does not name. A topic delete commits by
        rewriting topics.json and only then removes the directories; a crash in between leaves
        them behind, and a topic created later under the same name must not find that data."""
        for d in self.data_dir.iterdir():
            name, _, index = d.name.rpartition("-")
            if not (d.is_dir() and name and index.isdigit()) or name == METADATA_TOPIC:
                continue
            topic = self.by_name.get(name)
            if topic is None or int(index) >= len(topic.partitions):
                log.warning("removing the directory of a deleted partition", directory=d.name)
                shutil.rmtree(d, ignore_errors=True)

    def _save(self) -> None:
        data = {"version": TOPICS_FILE_VERSION, "topics": [
            {"name": t.name, "id": str(t.topic_id), "partitions": len(t.partitions), "configs": t.configs}
            for t in self.by_name.values()
        ]}
        atomic_write(self.meta_file, json.dumps(data).encode())

    def _index(self, topic: Topic) -> None:
        self.by_name[topic.name] = topic
        self.by_id[topic.topic_id] = topic

    # ---- operations --------------------------------------------------------------------------
    def get(self, name: str) -> Topic | None:
        return self.by_name.get(name)

    def partition(self, name: str, index: int) -> Partition | None:
        t = self.by_name.get(name)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def check_create(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str]) -> tuple[int, int]:
        """Validate a creation request; returns the effective (partitions, replication factor)."""
        validate_topic_name(name)
        if name in self.by_name:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        n = self.cfg.num_partitions if num_partitions == -1 else num_partitions
        rf = self.cfg.default_replication_factor if replication_factor == -1 else replication_factor
        if n <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"number of partitions must be positive, got {n}")
        if n > MAX_PARTITIONS:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"{n} partitions is more than this broker allows")
        if rf <= 0 or rf > 1:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"replication factor {rf} is larger than the 1 available broker")
        self.check_configs(configs)
        return n, rf

    def check_configs(self, configs: Mapping[str, str | None]) -> LogConfig:
        """Validate a complete set of topic overrides (names, types, ranges) as CreateTopics and
        both AlterConfigs APIs need it; returns the log settings they amount to."""
        for k, v in configs.items():
            if v is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"config {k!r} has no value")
            check_value(k, v)
        try:
            return self.log_config({k: v for k, v in configs.items() if v is not None})
        except ValueError as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None

    def create(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
               configs: dict[str, str] | None = None) -> Topic:
        configs = dict(configs or {})
        n, _rf = self.check_create(name, num_partitions, replication_factor, configs)
        topic = Topic(name, uuid.uuid4(), configs=configs)
        lc = self.log_config(configs)
        topic.partitions = [self._open_partition(name, i, lc) for i in range(n)]
        self._index(topic)
        self._save()
        log.info("topic created", topic=name, partitions=n)
        return topic

    def _existing(self, name: str) -> Topic:
        topic = self.by_name.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        return topic

    def check_add_partitions(self, name: str, count: int, assignments: list[list[int]] | None) -> Topic:
        """Validate raising a topic's partition count to `count`, with Kafka's errors and messages."""
        topic = self._existing(name)
        if topic.is_internal:
            # The group and transaction coordinators map keys to partitions by this count, fixed
            # at startup; records already written would be looked for in the wrong partition.
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"The number of partitions of the internal topic {name} cannot be changed.")
        current = len(topic.partitions)
        if count < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        if count > MAX_PARTITIONS:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"{count} partitions is more than this broker allows")
        if assignments is not None:
            added = count - current
            if len(assignments) != added:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Attempted to add {added} additional partition(s), but only "
                                 f"{len(assignments)} assignment(s) were specified.")
            for replicas in assignments:
                _check_assignment(replicas, self.cfg.node_id)
        return topic

    def add_partitions(self, name: str, count: int, assignments: list[list[int]] | None = None) -> Topic:
        """Open the new partitions' logs, then commit the new count to topics.json: a partition
        becomes visible (and writable) only once the table that names it is on disk."""
        topic = self.check_add_partitions(name, count, assignments)
        lc = self.log_config(topic.configs)
        first = len(topic.partitions)
        added = []
        for i in range(first, count):  # (an earlier add that crashed before _save: see _remove_orphans)
            added.append(self._open_partition(name, i, lc))
        topic.partitions.extend(added)
        try:
            self._save()
        except BaseException:
            del topic.partitions[first:]
            for p in added:
                p.close()
            raise
        log.info("partitions added", topic=name, partitions=count, was=first)
        return topic

    def check_alter_configs(self, name: str, configs: Mapping[str, str | None]) -> Topic:
        topic = self._existing(name)
        self.check_configs(configs)
        return topic

    def set_configs(self, name: str, configs: Mapping[str, str]) -> Topic:
        """Replace a topic's overrides (what AlterConfigs means; IncrementalAlterConfigs computes the
        whole new set first), persist them, then hand the new settings to every partition log."""
        topic = self._existing(name)
        lc = self.check_configs(configs)
        new = dict(configs)
        if new == topic.configs:
            return topic
        old, topic.configs = topic.configs, new
        try:
            self._save()
        except BaseException:
            topic.configs = old
            raise
        for p in topic.partitions:
            p.update_config(lc)
        log.info("topic configs altered", topic=name, configs=new)
        return topic

    def delete(self, name: str) -> Topic:
        topic = self.by_name.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        del self.by_name[name]
        del self.by_id[topic.topic_id]
        self._save()
        for p in topic.partitions:
            p.close()
            shutil.rmtree(self.data_dir / f"{name}-{p.index}", ignore_errors=True)
        log.info("topic deleted", topic=name)
        return topic

    def close(self) -> None:
        for t in self.by_name.values():
            for p in t.partitions:
                p.close()


def _check_assignment(replicas: list[int], node_id: int) -> None:
    if not replicas:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
    for b in replicas:
        if replicas.count(b) > 1:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes the broker {b} more than once.")
        if b != node_id:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes broker {b}, but no such broker is registered.")
