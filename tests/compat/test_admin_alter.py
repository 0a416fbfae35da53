"""Real admin clients growing topics and altering topic configs on Ketch: confluent-kafka's
AdminClient (create_partitions, incremental_alter_configs, alter_configs) and kafka-python's
KafkaAdminClient (create_partitions, alter_configs both ways)."""

from __future__ import annotations

import warnings
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    ResourceType,
)
from helpers import BrokerProcess, unique_topic, wait_until
from helpers.confluent import admin, create_topic, topic_partition_count

with warnings.catch_warnings():  # kafka-python loads its schemas with a deprecated importlib API
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors
    from kafka.admin import AlterConfigOp, KafkaAdminClient
    from kafka.admin import ConfigResource as KpConfigResource

pytestmark = pytest.mark.compat


def _error(fut: Future[Any]) -> KafkaError:
    with pytest.raises(KafkaException) as exc:
        fut.result(30)
    return exc.value.args[0]


def _topic_configs(bootstrap: str, topic: str) -> dict[str, tuple[str | None, ConfigSource]]:
    client = admin(bootstrap)
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = client.describe_configs([res], request_timeout=30)[res].result(30)
    return {name: (e.value, ConfigSource(e.source)) for name, e in entries.items()}


def _overrides(bootstrap: str, topic: str) -> dict[str, str | None]:
    return {k: v for k, (v, src) in _topic_configs(bootstrap, topic).items() if src == ConfigSource.DYNAMIC_TOPIC_CONFIG}


# ---- confluent-kafka (librdkafka) ----------------------------------------------------------------

def test_confluent_create_partitions(module_broker: BrokerProcess) -> None:
    bs, t = module_broker.bootstrap, unique_topic("cf-grow")
    create_topic(bs, t, 2)
    client = admin(bs)
    client.create_partitions([NewPartitions(t, 4)], validate_only=True, request_timeout=30)[t].result(30)
    # every broker knows the topic a moment after it was created (at once on a single broker)
    wait_until(lambda: topic_partition_count(bs, t) == 2, timeout=15, message=f"{t} with 2 partitions")
    client.create_partitions([NewPartitions(t, 4)], request_timeout=30)[t].result(30)
    wait_until(lambda: topic_partition_count(bs, t) == 4, timeout=15, message=f"{t} with 4 partitions")

    err = _error(client.create_partitions([NewPartitions(t, 3)], request_timeout=30)[t])
    assert err.code() == KafkaError.INVALID_PARTITIONS
    assert "which is higher than the requested 3" in err.str()
    missing = unique_topic("cf-missing")
    err = _error(client.create_partitions([NewPartitions(missing, 3)], request_timeout=30)[missing])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    err = _error(client.create_partitions([NewPartitions(t, 5, replica_assignment=[[42]])], request_timeout=30)[t])
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert topic_partition_count(bs, t) == 4


def test_confluent_incremental_alter_configs(module_broker: BrokerProcess) -> None:
    bs, t = module_broker.bootstrap, unique_topic("cf-incr")
    create_topic(bs, t, 1)
    client = admin(bs)

    def alter(*entries: ConfigEntry, validate_only: bool = False) -> Future[Any]:
        res = ConfigResource(ResourceType.TOPIC, t, incremental_configs=list(entries))
        return client.incremental_alter_configs([res], validate_only=validate_only, request_timeout=30)[res]

    SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
    alter(ConfigEntry("retention.ms", "3600000", incremental_operation=SET),
          ConfigEntry("max.message.bytes", "4000", incremental_operation=SET)).result(30)
    configs = _topic_configs(bs, t)
    assert configs["retention.ms"] == ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert configs["max.message.bytes"] == ("4000", ConfigSource.DYNAMIC_TOPIC_CONFIG)

    alter(ConfigEntry("retention.ms", None, incremental_operation=DELETE)).result(30)
    assert _topic_configs(bs, t)["retention.ms"][1] == ConfigSource.DEFAULT_CONFIG
    alter(ConfigEntry("segment.bytes", "2048", incremental_operation=SET), validate_only=True).result(30)
    assert _overrides(bs, t) == {"max.message.bytes": "4000"}

    err = _error(alter(ConfigEntry("retention.ms", "soon", incremental_operation=SET)))
    assert err.code() == KafkaError.INVALID_CONFIG and "Not a number" in err.str()
    err = _error(alter(ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)))
    assert err.code() == KafkaError.INVALID_CONFIG and "not LIST" in err.str()

    # a broker setting that is not dynamic here: an error in Kafka's terms, and the broker keeps serving
    broker_res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("num.partitions", "3", incremental_operation=SET)])
    err = _error(client.incremental_alter_configs([broker_res], request_timeout=30)[broker_res])
    assert err.code() == KafkaError.INVALID_CONFIG and "Cannot update these configs dynamically" in err.str()
    assert _overrides(bs, t) == {"max.message.bytes": "4000"}


def test_confluent_alter_configs_replaces_the_overrides(module_broker: BrokerProcess) -> None:
    bs, t = module_broker.bootstrap, unique_topic("cf-legacy")
    create_topic(bs, t, 1)
    client = admin(bs)

    def alter(configs: dict[str, str], validate_only: bool = False) -> Future[Any]:
        res = ConfigResource(ResourceType.TOPIC, t, set_config=configs)
        with warnings.catch_warnings():  # alter_configs is deprecated in favour of the incremental API
            warnings.simplefilter("ignore", DeprecationWarning)
            return client.alter_configs([res], validate_only=validate_only, request_timeout=30)[res]

    alter({"retention.ms": "60000", "segment.bytes": "1048576"}).result(30)
    assert _overrides(bs, t) == {"retention.ms": "60000", "segment.bytes": "1048576"}
    alter({"segment.ms": "3600000"}).result(30)
    assert _overrides(bs, t) == {"segment.ms": "3600000"}
    alter({"retention.ms": "1"}, validate_only=True).result(30)
    assert _overrides(bs, t) == {"segment.ms": "3600000"}
    err = _error(alter({"no.such.config": "1"}))
    assert err.code() == KafkaError.INVALID_CONFIG
    assert _overrides(bs, t) == {"segment.ms": "3600000"}


# ---- kafka-python --------------------------------------------------------------------------------

def _kp_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)


def test_kafka_python_create_partitions(module_broker: BrokerProcess) -> None:
    bs, t = module_broker.bootstrap, unique_topic("kp-grow")
    create_topic(bs, t, 1)
    client = _kp_admin(bs)
    try:
        client.create_partitions({t: 3}, validate_only=True)
        wait_until(lambda: topic_partition_count(bs, t) == 1, timeout=15, message=f"{t} with 1 partition")
        client.create_partitions({t: 3})
        wait_until(lambda: topic_partition_count(bs, t) == 3, timeout=15, message=f"{t} with 3 partitions")
        with pytest.raises(kafka.errors.InvalidPartitionsError):
            client.create_partitions({t: 2})
        with pytest.raises(kafka.errors.UnknownTopicOrPartitionError):
            client.create_partitions({unique_topic("kp-missing"): 2})
    finally:
        client.close()
    assert topic_partition_count(bs, t) == 3


@pytest.mark.parametrize("incremental", [False, True], ids=["AlterConfigs", "IncrementalAlterConfigs"])
def test_kafka_python_alter_configs(module_broker: BrokerProcess, incremental: bool) -> None:
    bs, t = module_broker.bootstrap, unique_topic("kp-alter")
    create_topic(bs, t, 1)
    client = _kp_admin(bs)
    try:
        def alter(configs: dict[str, Any], validate_only: bool = False) -> str:
            got = client.alter_configs([KpConfigResource("TOPIC", t, configs=configs)], validate_only=validate_only,
                                       incremental=incremental)
            return got["topic"][t]

        assert alter({"retention.ms": "60000"}) == "OK"
        # kafka-python keeps the other overrides itself when it has to use AlterConfigs
        assert alter({"segment.bytes": "1048576"}) == "OK"
        assert _overrides(bs, t) == {"retention.ms": "60000", "segment.bytes": "1048576"}
        assert alter({"retention.ms": "1"}, validate_only=True) == "OK"
        assert _overrides(bs, t) == {"retention.ms": "60000", "segment.bytes": "1048576"}
        if incremental:
            assert alter({"retention.ms": (AlterConfigOp.DELETE, None)}) == "OK"
            assert _overrides(bs, t) == {"segment.bytes": "1048576"}
        assert "InvalidConfiguration" in alter({"segment.bytes": "huge"})
        described = client.describe_configs([KpConfigResource("TOPIC", t)])["topic"][t]
        assert described["segment.bytes"]["value"] == "1048576"
        assert described["segment.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    finally:
        client.close()


# ---- issue 10: every Kafka 4.x topic config, DescribeConfigs as Kafka 4 answers it ---------------

def test_confluent_alter_configs_take_kafka_4_topic_configs(module_broker: BrokerProcess) -> None:
    bs, t = module_broker.bootstrap, unique_topic("cf-k4")
    create_topic(bs, t, 1)
    client = admin(bs)
    res = ConfigResource(ResourceType.TOPIC, t, set_config={
        "file.delete.delay.ms": "1000", "segment.jitter.ms": "10", "preallocate": "true",
        "message.timestamp.after.max.ms": "60000", "unclean.leader.election.enable": "false",
        "leader.replication.throttled.replicas": "*", "local.retention.ms": "-2"})
    client.alter_configs([res], request_timeout=30)[res].result(30)
    assert _overrides(bs, t)["file.delete.delay.ms"] == "1000"

    # SUBTRACT the only policy: an empty cleanup.policy (no deletion, no compaction), as Kafka 4 accepts
    incr = ConfigResource(ResourceType.TOPIC, t, incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)])
    client.incremental_alter_configs([incr], request_timeout=30)[incr].result(30)
    assert _topic_configs(bs, t)["cleanup.policy"] == ("", ConfigSource.DYNAMIC_TOPIC_CONFIG)

    bad = ConfigResource(ResourceType.TOPIC, t, set_config={"remote.storage.enable": "true"})
    err = _error(client.alter_configs([bad], request_timeout=30)[bad])
    assert err.code() == KafkaError.INVALID_CONFIG and "Tiered Storage" in err.str()


def _describe(bs: str, res: ConfigResource) -> dict[str, Any]:
    client = admin(bs)  # kept alive until the answer is in
    return client.describe_configs([res], request_timeout=30)[res].result(30)


def test_confluent_describe_configs_types_sources_synonyms_and_docs(module_broker: BrokerProcess) -> None:
    bs, t = module_broker.bootstrap, unique_topic("cf-describe")
    create_topic(bs, t, 1)
    res = ConfigResource(ResourceType.TOPIC, t, set_config={"retention.ms": "3600000"})
    client = admin(bs)
    client.alter_configs([res], request_timeout=30)[res].result(30)
    entries = _describe(bs, ConfigResource(ResourceType.TOPIC, t))
    assert len(entries) == 33 and "file.delete.delay.ms" in entries and "segment.index.bytes" in entries
    retention = entries["retention.ms"]
    assert ConfigSource(retention.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert [(s.name, s.value, ConfigSource(s.source)) for s in retention.synonyms.values()] == [
        ("retention.ms", "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG)]
    assert ConfigSource(entries["segment.bytes"].source) == ConfigSource.DEFAULT_CONFIG

    broker = _describe(bs, ConfigResource(ResourceType.BROKER, "1"))
    assert broker["advertised.listeners"].value.startswith(f"PLAINTEXT://{module_broker.host}:{module_broker.port}")
    assert broker["node.id"].value == "1" and broker["log.dirs"].value
    assert "PLAINTEXT://" in broker["listeners"].value
    assert broker["log.retention.ms"].value == "604800000" and broker["log.cleanup.policy"].value == "delete"
    assert ConfigSource(broker["num.partitions"].source) == ConfigSource.DEFAULT_CONFIG
    assert ConfigSource(broker["node.id"].source) == ConfigSource.DEFAULT_CONFIG


def test_describe_configs_v4_carries_kafkas_types_and_documentation(module_broker: BrokerProcess) -> None:
    """confluent-kafka does not expose config types, so the v4 answer is read off the wire."""
    from helpers.raw import Raw  # noqa: PLC0415

    from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource

    bs, t = module_broker.bootstrap, unique_topic("raw-describe")
    create_topic(bs, t, 1)
    raw = Raw(module_broker.port)
    try:
        resp = raw.request(DescribeConfigsRequest(resources=[
            DescribeConfigsResource(resource_type=2, resource_name=t, configuration_keys=None),
            DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=None)],
            include_synonyms=True, include_documentation=True), 4)
    finally:
        raw.close()
    topic, broker = resp.results  # type: ignore[union-attr]
    types = {c.name: c.config_type for c in topic.configs}
    LONG, LIST, INT, BOOLEAN, DOUBLE, STRING = 5, 7, 3, 1, 6, 2  # Kafka's ConfigType ids
    assert types["retention.bytes"] == LONG and types["cleanup.policy"] == LIST and types["segment.bytes"] == INT
    assert types["preallocate"] == BOOLEAN and types["min.cleanable.dirty.ratio"] == DOUBLE
    assert types["compression.type"] == STRING and 0 not in types.values()
    assert all(c.documentation for c in topic.configs + broker.configs)
    btypes = {c.name: c.config_type for c in broker.configs}
    assert btypes["num.partitions"] == INT and btypes["auto.create.topics.enable"] == BOOLEAN
    assert btypes["advertised.listeners"] == LIST and 0 not in btypes.values()
