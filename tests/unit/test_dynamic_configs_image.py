"""Dynamic broker configs in the metadata log (issue 23, item 2's KIP-966 remainder: Kafka 4.1's
cluster-wide min.insync.replicas): ConfigRecords on BROKER resources, applied by every broker,
written by the controller at activation when missing, and layered over the static settings."""

from __future__ import annotations

import pytest

from broker.controller.quorum_controller import QuorumController
from broker.metadata.dynamic_configs import (
    SOURCE_DYNAMIC_BROKER,
    SOURCE_DYNAMIC_DEFAULT_BROKER,
    check,
    topic_defaults,
)
from broker.metadata.image import MetadataImage
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.metadata_records import unframe_batch


def _commit(c: QuorumController, entry: bytes | None) -> None:
    assert entry is not None
    c.metadata.replay_all(c.image.offset + 1, unframe_batch(entry))


def test_the_controller_writes_the_cluster_min_isr_once_at_activation() -> None:
    c = QuorumController(min_insync_replicas=2)
    _commit(c, c.activate())
    assert c.image.broker_configs == {"": {"min.insync.replicas": "2"}}
    c.min_insync_replicas = 3  # another controller's static setting
    assert c.activate() is None  # one is there: an operator's value stays
    _commit(c, c.set_broker_configs("", {"min.insync.replicas": "1", "log.retention.ms": "60000"}))
    assert c.activate() is None
    assert c.image.broker_configs[""] == {"min.insync.replicas": "1", "log.retention.ms": "60000"}


def test_a_broker_resource_sets_replaces_and_removes_and_survives_a_snapshot() -> None:
    c = QuorumController()
    _commit(c, c.set_broker_configs("", {"log.retention.ms": "60000"}))
    _commit(c, c.set_broker_configs("2", {"log.retention.ms": "1000", "log.segment.bytes": "4096"}))
    img = c.image
    assert (img.broker_config(2, "log.retention.ms"), img.broker_config(1, "log.retention.ms")) == ("1000", "60000")
    assert img.broker_config(1, "log.segment.bytes") is None
    assert MetadataImage.from_snapshot(img.to_snapshot()) == img
    assert c.set_broker_configs("2", {"log.retention.ms": "1000", "log.segment.bytes": "4096"}) is None  # no change
    _commit(c, c.set_broker_configs("2", {}))
    assert "2" not in c.image.broker_configs
    with pytest.raises(KafkaError) as e:
        c.set_broker_configs("broker-1", {})
    assert e.value.code == ErrorCode.INVALID_REQUEST


def test_a_topic_default_comes_from_the_broker_then_the_cluster() -> None:
    c = QuorumController()
    _commit(c, c.set_broker_configs("", {"min.insync.replicas": "2", "log.retention.ms": "60000"}))
    _commit(c, c.set_broker_configs("1", {"log.retention.ms": "5000"}))
    assert topic_defaults(c.image, 1) == {
        "min.insync.replicas": ("min.insync.replicas", "2", SOURCE_DYNAMIC_DEFAULT_BROKER),
        "retention.ms": ("log.retention.ms", "5000", SOURCE_DYNAMIC_BROKER)}
    assert topic_defaults(c.image, 2)["retention.ms"] == ("log.retention.ms", "60000", SOURCE_DYNAMIC_DEFAULT_BROKER)


def test_only_topic_defaults_are_dynamic_and_their_values_are_checked() -> None:
    check({"min.insync.replicas": "2", "log.retention.ms": "-1"})
    for bad in ({"num.partitions": "3"}, {"min.insync.replicas": "zero"}, {"min.insync.replicas": "0"}):
        with pytest.raises(KafkaError) as e:
            check(bad)
        assert e.value.code == ErrorCode.INVALID_CONFIG, bad
