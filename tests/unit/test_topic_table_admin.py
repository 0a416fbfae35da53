"""The topic table's add-partitions and alter-configs logic in process: the rules of
IncrementalAlterConfigs operations, validation, persistence, and rollback when the table cannot be
written (a client must never be told about partitions or configs that a restart would lose)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.partition import AppendOrigin
from broker.topic_configs import APPEND, DELETE, SET, SUBTRACT, ConfigOp, apply_ops
from broker.topics import TopicTable
from protocol.errors import ErrorCode, KafkaError
from storage.clock import SystemClock

DEFAULTS = {"cleanup.policy": "delete", "retention.ms": "604800000"}


def test_apply_ops_set_delete_append_subtract() -> None:
    assert apply_ops({"retention.ms": "1"}, DEFAULTS, [ConfigOp("segment.ms", "5", SET),
                                                       ConfigOp("retention.ms", None, DELETE)]) == {"segment.ms": "5"}
    # APPEND starts from the default when the topic has no override, and never duplicates
    assert apply_ops({}, DEFAULTS, [ConfigOp("cleanup.policy", "compact,delete", APPEND)]) == {
        "cleanup.policy": "delete,compact"}
    assert apply_ops({"cleanup.policy": "compact,delete"}, DEFAULTS,
                     [ConfigOp("cleanup.policy", "delete", SUBTRACT)]) == {"cleanup.policy": "compact"}
    assert apply_ops({}, DEFAULTS, [ConfigOp("cleanup.policy", "delete", SUBTRACT)]) == {"cleanup.policy": ""}
    with pytest.raises(KafkaError) as e:
        apply_ops({}, DEFAULTS, [ConfigOp("retention.ms", "1", APPEND)])
    assert e.value.code == ErrorCode.INVALID_CONFIG and "not LIST" in e.value.message


def _table(tmp_path: Path) -> TopicTable:
    t = TopicTable(BrokerConfig(data_dir=str(tmp_path)), SystemClock())
    t.load()
    return t


@pytest.mark.parametrize(("configs", "fragment"), [
    ({"retention.ms": "1.5"}, "Not a number of type LONG"),
    ({"segment.bytes": str(2**31)}, "Not a number of type INT"),
    ({"min.cleanable.dirty.ratio": "half"}, "Not a number of type DOUBLE"),
    ({"compression.type": "brotli"}, "String must be one of"),
    ({"min.insync.replicas": "0"}, "at least 1"),
    ({"message.timestamp.type": "Whenever"}, "String must be one of: CreateTime, LogAppendTime"),
    ({"unclean.leader.election.enable": "maybe"}, "Expected value to be either true or false"),
    ({"cleanup.policy": "compact,shred"}, "String must be one of: compact, delete"),
    ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled"),
    ({"leader.replication.throttled.replicas": "0:x"}, "partitionId:brokerId"),
    ({"compression.lz4.level": "18"}, "between 1 and 17"),
    ({"message.format.version": "3.0"}, "Unknown topic config name"),  # gone in Kafka 4
])
def test_check_configs_refuses_bad_values(tmp_path: Path, configs: dict[str, str], fragment: str) -> None:
    with pytest.raises(KafkaError) as e:
        _table(tmp_path).check_configs(configs)
    assert e.value.code == ErrorCode.INVALID_CONFIG and fragment in e.value.message


def test_every_kafka_4_topic_config_is_accepted_and_the_acted_on_ones_reach_the_log(tmp_path: Path) -> None:
    from broker.config_catalog import TOPIC_CONFIGS

    table = _table(tmp_path)
    table.create("all", 1, configs={
        "file.delete.delay.ms": "1000", "segment.jitter.ms": "5", "preallocate": "true",
        "message.timestamp.before.max.ms": "100", "message.timestamp.after.max.ms": "100",
        "unclean.leader.election.enable": "false", "follower.replication.throttled.replicas": "*",
        "leader.replication.throttled.replicas": "0:1,1:1", "local.retention.ms": "-2",
        "local.retention.bytes": "-2", "remote.storage.enable": "false", "min.compaction.lag.ms": "0",
        "max.compaction.lag.ms": "1000", "compression.gzip.level": "5", "compression.zstd.level": "-5",
        "index.interval.bytes": "128", "segment.index.bytes": "4096", "cleanup.policy": ""})
    lc = table.by_name["all"].partitions[0].log.config
    assert (lc.index_interval_bytes, lc.max_index_size) == (128, 4096)
    assert not lc.deletes and not lc.compacts  # an empty cleanup.policy keeps everything
    assert set(table.effective_configs({})) == set(TOPIC_CONFIGS) and len(TOPIC_CONFIGS) == 33
    table.close()


def test_added_partitions_and_configs_are_reloaded(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.create("t", 2, configs={"retention.ms": "60000"})
    table.close()
    (tmp_path / "t-3").mkdir()
    (tmp_path / "t-3" / "leftover.log").write_bytes(b"x")  # from an add that never reached topics.json
    table = _table(tmp_path)
    assert not (tmp_path / "t-3").exists()
    table.add_partitions("t", 4)
    table.set_configs("t", {"segment.bytes": "4096"})
    assert all(p.log.config.segment_bytes == 4096 and p.log.config.retention_ms == 604800000
               for p in table.by_name["t"].partitions)
    table.close()

    again = _table(tmp_path)
    topic = again.by_name["t"]
    assert [p.index for p in topic.partitions] == [0, 1, 2, 3]
    assert topic.configs == {"segment.bytes": "4096"}
    assert all(p.log.config.segment_bytes == 4096 for p in topic.partitions)
    again.close()


def test_nothing_changes_when_the_table_cannot_be_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table(tmp_path)
    table.create("t", 1, configs={"retention.ms": "60000"})

    def full_disk() -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(table, "_save", full_disk)
    with pytest.raises(OSError):
        table.add_partitions("t", 3)
    with pytest.raises(OSError):
        table.set_configs("t", {"retention.ms": "1000"})
    topic = table.by_name["t"]
    assert len(topic.partitions) == 1 and topic.configs == {"retention.ms": "60000"}
    assert topic.partitions[0].log.config.retention_ms == 60000
    table.close()


def test_a_topic_deleted_just_before_a_crash_does_not_come_back_in_a_new_topic(tmp_path: Path) -> None:
    """Delete commits by rewriting topics.json, then removes the directories: a crash in between
    leaves them behind. A topic created later under the same name must start empty."""
    from protocol.records import Record, build_batch

    table = _table(tmp_path)
    table.create("t", 2)
    table.create("keep", 1)
    for p in table.by_name["t"].partitions:
        p.append(build_batch([Record(0, 0, b"k", b"old")]), AppendOrigin.CLIENT)
    table.by_name["keep"].partitions[0].append(build_batch([Record(0, 0, b"k", b"kept")]), AppendOrigin.CLIENT)
    # the first half of delete("t") only, as if the process died before removing the directories
    del table.by_id[table.by_name["t"].topic_id]
    del table.by_name["t"]
    table._save()
    table.close()
    assert (tmp_path / "t-0").is_dir()

    again = _table(tmp_path)
    assert not (tmp_path / "t-0").exists() and not (tmp_path / "t-1").exists()
    assert again.by_name["keep"].partitions[0].log.log_end_offset == 1
    fresh = again.create("t", 2)
    assert [p.log.log_end_offset for p in fresh.partitions] == [0, 0]
    again.close()
