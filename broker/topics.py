"""The topics this broker holds: names, ids, partition counts, per-topic config, on-disk logs.

Until the metadata quorum exists (design.md §6) the topic table is a JSON file in the data
directory, rewritten atomically on every change; the logs are the partitions' own directories.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from protocol.errors import ErrorCode, KafkaError
from storage.config import LogConfig

from .config import BrokerConfig
from .partition import Partition

log = structlog.get_logger()

LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LEN = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

# Topic-level settings we understand, with the broker-level setting that gives the default.
TOPIC_CONFIGS = {
    "cleanup.policy": "delete",
    "retention.ms": None,
    "retention.bytes": None,
    "segment.bytes": None,
    "segment.ms": None,
    "max.message.bytes": None,
    "flush.messages": None,
    "flush.ms": None,
    "message.timestamp.type": "CreateTime",
    "min.insync.replicas": "1",
    "compression.type": "producer",
    "delete.retention.ms": None,
    "min.cleanable.dirty.ratio": None,
}


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

    def __init__(self, cfg: BrokerConfig) -> None:
        self.cfg = cfg
        self.data_dir = Path(cfg.data_dir)
        self.meta_file = self.data_dir / "topics.json"
        self.by_name: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}

    def effective_configs(self, configs: dict[str, str]) -> dict[str, str]:
        c = self.cfg
        defaults = {
            "cleanup.policy": "delete",
            "retention.ms": str(c.log_retention_ms),
            "retention.bytes": str(c.log_retention_bytes),
            "segment.bytes": str(c.log_segment_bytes),
            "segment.ms": str(c.log_segment_ms),
            "max.message.bytes": str(c.message_max_bytes),
            "flush.messages": str(c.flush_messages) if c.flush_messages else "9223372036854775807",
            "flush.ms": str(c.flush_ms) if c.flush_ms else "9223372036854775807",
            "message.timestamp.type": "CreateTime",
            "min.insync.replicas": "1",
            "compression.type": "producer",
            "delete.retention.ms": "86400000",
            "min.cleanable.dirty.ratio": "0.5",
        }
        defaults.update(configs)
        return defaults

    def log_config(self, configs: dict[str, str]) -> LogConfig:
        e = self.effective_configs(configs)
        big = 9223372036854775807
        flush_messages = int(e["flush.messages"])
        flush_ms = int(e["flush.ms"])
        return LogConfig(
            segment_bytes=int(e["segment.bytes"]),
            segment_ms=int(e["segment.ms"]),
            retention_ms=int(e["retention.ms"]),
            retention_bytes=int(e["retention.bytes"]),
            flush_messages=None if flush_messages >= big else flush_messages,
            flush_ms=None if flush_ms >= big else flush_ms,
            cleanup_policy=e["cleanup.policy"],  # type: ignore[arg-type]
            message_timestamp_type=e["message.timestamp.type"],  # type: ignore[arg-type]
            delete_retention_ms=int(e["delete.retention.ms"]),
            min_cleanable_dirty_ratio=float(e["min.cleanable.dirty.ratio"]),
            producer_id_expiration_ms=self.cfg.producer_id_expiration_ms,
        )

    # ---- persistence -------------------------------------------------------------------------
    def load(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.meta_file.exists():
            return
        data = json.loads(self.meta_file.read_text())
        for t in data["topics"]:
            topic = Topic(t["name"], uuid.UUID(t["id"]), configs=t.get("configs", {}))
            lc = self.log_config(topic.configs)
            topic.partitions = [Partition.open(self.data_dir, topic.name, i, lc) for i in range(t["partitions"])]
            self._index(topic)
        log.info("topics loaded", topics=len(self.by_name),
                 partitions=sum(len(t.partitions) for t in self.by_name.values()))

    def _save(self) -> None:
        data = {"version": 1, "topics": [
            {"name": t.name, "id": str(t.topic_id), "partitions": len(t.partitions), "configs": t.configs}
            for t in self.by_name.values()
        ]}
        tmp = self.meta_file.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            json.dump(data, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.meta_file)
        dfd = os.open(self.data_dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

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
        if n > 100_000:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"{n} partitions is more than this broker allows")
        if rf <= 0 or rf > 1:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"replication factor {rf} is larger than the 1 available broker")
        for k, v in configs.items():
            if k not in TOPIC_CONFIGS:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"unknown topic config {k!r}")
            if v is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"config {k!r} has no value")
        try:
            self.log_config(configs)
        except ValueError as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None
        return n, rf

    def create(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
               configs: dict[str, str] | None = None) -> Topic:
        configs = dict(configs or {})
        n, _rf = self.check_create(name, num_partitions, replication_factor, configs)
        topic = Topic(name, uuid.uuid4(), configs=configs)
        lc = self.log_config(configs)
        topic.partitions = [Partition.open(self.data_dir, name, i, lc) for i in range(n)]
        self._index(topic)
        self._save()
        log.info("topic created", topic=name, partitions=n)
        return topic

    def delete(self, name: str) -> Topic:
        topic = self.by_name.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        del self.by_name[name]
        del self.by_id[topic.topic_id]
        self._save()
        for p in topic.partitions:
            p.notify()
            p.log.close()
            shutil.rmtree(self.data_dir / f"{name}-{p.index}", ignore_errors=True)
        log.info("topic deleted", topic=name)
        return topic

    def close(self) -> None:
        for t in self.by_name.values():
            for p in t.partitions:
                p.log.close()
