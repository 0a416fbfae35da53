"""A real admin client on a broker with two log directories: kafka-python's KafkaAdminClient
describe_log_dirs parses every directory (librdkafka has no DescribeLogDirs), and its
alter_replica_log_dirs moves a replica from one to the other."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from helpers import BrokerProcess, unique_topic, wait_until
from helpers.confluent import QUIET, create_topic

with warnings.catch_warnings():  # kafka-python loads its schemas with a deprecated importlib API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def disks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("two-disks")
    return base / "disk-a", base / "disk-b"


@pytest.fixture(scope="module")
def two_dir_broker(tmp_path_factory: pytest.TempPathFactory, disks: tuple[Path, Path]) -> Iterator[BrokerProcess]:
    a, b = disks
    broker = BrokerProcess(a.parent / "data", env={"KETCH_LOG_DIRS": f"{a},{b}"}, log_path=a.parent / "broker.log")
    broker.start()
    try:
        yield broker
    finally:
        broker.close()


def _fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    create_topic(bootstrap, topic, partitions)
    p = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for i in range(per_partition * partitions):
        p.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def _by_dir(described: list[dict[str, Any]], topic: str) -> dict[str, dict[tuple[int, bool], dict[str, Any]]]:
    (broker,) = described
    return {d["log_dir"]: {(p["partition_index"], p["is_future_key"]): p
                           for t in d["topics"] if t["name"] == topic for p in t["partitions"]}
            for d in broker["log_dirs"]}


def test_kafka_python_describe_log_dirs_lists_both_dirs(two_dir_broker: BrokerProcess, disks: tuple[Path, Path]) -> None:
    a, b = disks
    t = unique_topic("kp-2dirs")
    _fill(two_dir_broker.bootstrap, t, 2, 20)
    client = KafkaAdminClient(bootstrap_servers=two_dir_broker.bootstrap, request_timeout_ms=30_000)
    try:
        described = client.describe_log_dirs({t: [0, 1]})
    finally:
        client.close()
    (broker,) = described
    assert [(d["log_dir"], d["error_code"]) for d in broker["log_dirs"]] == [(str(a), 0), (str(b), 0)]
    assert all(d["total_bytes"] >= d["usable_bytes"] > 0 for d in broker["log_dirs"])
    parts = _by_dir(described, t)
    # the two partitions went one to each directory (the one holding fewer)
    assert {i for d in parts.values() for i, _ in d} == {0, 1}
    assert all(len(d) == 1 for d in parts.values())
    assert all(p["partition_size"] > 0 and p["offset_lag"] == 0 for d in parts.values() for p in d.values())


def test_kafka_python_alter_replica_log_dirs_moves_a_replica(two_dir_broker: BrokerProcess,
                                                             disks: tuple[Path, Path]) -> None:
    a, b = disks
    t = unique_topic("kp-move")
    _fill(two_dir_broker.bootstrap, t, 2, 200)
    client = KafkaAdminClient(bootstrap_servers=two_dir_broker.bootstrap, request_timeout_ms=30_000)
    try:
        before = _by_dir(client.describe_log_dirs({t: [0, 1]}), t)
        (source,) = [d for d, parts in before.items() if (0, False) in parts]
        target = str(b) if source == str(a) else str(a)
        result = client.alter_replica_log_dirs({(t, 0, 1): target, (t, 1, 1): str(a.parent / "not-a-log-dir")})
        assert {(k.topic, k.partition): v.__name__ for k, v in result.items()} == {
            (t, 0): "NoError", (t, 1): "LogDirNotFoundError"}
        def moved() -> dict[str, dict[tuple[int, bool], dict[str, Any]]] | None:
            d = _by_dir(client.describe_log_dirs({t: [0]}), t)
            return d if set(d[target]) == {(0, False)} else None

        after = wait_until(moved, timeout=30, message="partition 0 in the other log directory, and only there")
        assert after[target][(0, False)]["partition_size"] == before[source][(0, False)]["partition_size"]
        assert (0, False) not in after[source]
    finally:
        client.close()
