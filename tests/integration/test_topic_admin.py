"""CreatePartitions, IncrementalAlterConfigs and AlterConfigs against a real broker, on the wire.

Success paths at every advertised version, validate_only, Kafka's error for each refusal, that
new partitions take data at once, that altered configs act on the running logs (max.message.bytes
on produce, segment.bytes on rolling, retention.ms on deletion), and that both survive a clean
restart and a SIGKILL.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers import BrokerProcess, unique_topic, wait_until
from helpers.raw import Raw

from client import Admin
from client.admin import CONFIG_APPEND, CONFIG_DELETE, AlterConfigOp
from protocol.errors import ErrorCode
from protocol.messages.alter_configs import AlterableConfig as LegacyConfig
from protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from protocol.messages.alter_configs import AlterConfigsResource as LegacyResource
from protocol.messages.create_partitions import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
)
from protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.records import build_batch_from_messages, decode_batches

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
SOURCE_TOPIC, SOURCE_DEFAULT = 1, 5  # DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG
NODE_ID = 1  # the broker's default node id


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Most tests share one broker (unique topics each); `conn` (tests/conftest.py) talks to it."""
    return module_broker


# ---- wire helpers --------------------------------------------------------------------------------

def create(conn: Raw, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    resp = conn.request(CreateTopicsRequest(topics=[CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=-1,
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])], timeout_ms=5000), 5)
    assert resp is not None and resp.topics[0].error_code == 0, resp  # type: ignore[attr-defined]


def grow(conn: Raw, *topics: tuple[str, int] | tuple[str, int, list[list[int]] | None], validate_only: bool = False,
         version: int = 3) -> dict[str, tuple[int, str | None]]:
    req = CreatePartitionsRequest(topics=[CreatePartitionsTopic(
        name=t[0], count=t[1],
        assignments=None if len(t) < 3 or t[2] is None else [CreatePartitionsAssignment(broker_ids=b) for b in t[2]])
        for t in topics], timeout_ms=5000, validate_only=validate_only)
    resp = conn.request(req, version)
    assert isinstance(resp, CreatePartitionsResponse)
    assert len(resp.results) == len({t[0] for t in topics})
    return {r.name: (r.error_code, r.error_message) for r in resp.results}


def incremental(conn: Raw, *resources: tuple[int, str, list[tuple[str, int, str | None]]],
                validate_only: bool = False, version: int = 1) -> list[tuple[int, str | None]]:
    resp = conn.request(IncrementalAlterConfigsRequest(resources=[
        AlterConfigsResource(resource_type=rt, resource_name=n,
                             configs=[AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])
        for rt, n, ops in resources], validate_only=validate_only), version)
    assert isinstance(resp, IncrementalAlterConfigsResponse)
    assert [(r.resource_type, r.resource_name) for r in resp.responses] == [(r[0], r[1]) for r in resources]
    return [(r.error_code, r.error_message) for r in resp.responses]


def legacy(conn: Raw, *resources: tuple[int, str, dict[str, str | None]], validate_only: bool = False,
           version: int = 2) -> list[tuple[int, str | None]]:
    resp = conn.request(AlterConfigsRequest(resources=[
        LegacyResource(resource_type=rt, resource_name=n, configs=[LegacyConfig(name=k, value=v) for k, v in c.items()])
        for rt, n, c in resources], validate_only=validate_only), version)
    assert isinstance(resp, AlterConfigsResponse)
    assert [(r.resource_type, r.resource_name) for r in resp.responses] == [(r[0], r[1]) for r in resources]
    return [(r.error_code, r.error_message) for r in resp.responses]


def describe(conn: Raw, name: str) -> dict[str, tuple[str | None, int]]:
    resp = conn.request(DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=TOPIC, resource_name=name, configuration_keys=None)]), 4)
    assert isinstance(resp, DescribeConfigsResponse) and resp.results[0].error_code == 0
    return {c.name: (c.value, c.config_source) for c in resp.results[0].configs}


def overrides(conn: Raw, name: str) -> dict[str, str | None]:
    return {k: v for k, (v, src) in describe(conn, name).items() if src == SOURCE_TOPIC}


def partition_count(conn: Raw, name: str) -> int:
    md = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name=name)], allow_auto_topic_creation=False), 12)
    assert isinstance(md, MetadataResponse) and md.topics[0].error_code == 0
    parts = md.topics[0].partitions
    assert sorted(p.partition_index for p in parts) == list(range(len(parts)))
    assert all(p.leader_id == NODE_ID and p.error_code == 0 for p in parts)
    return len(parts)


def produce(conn: Raw, topic: str, partition: int, values: list[bytes], ts: int | None = None) -> int:
    """Base offset of the batch, or raises with the error code."""
    batch = build_batch_from_messages([(None, v, [], ts) for v in values])
    resp = conn.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=partition, records=batch)])]), 9)
    assert isinstance(resp, ProduceResponse)
    p = resp.responses[0].partition_responses[0]
    if p.error_code:
        raise AssertionError(f"produce to {topic}-{partition}: {ErrorCode(p.error_code).name}")
    return p.base_offset


def produce_code(conn: Raw, topic: str, partition: int, values: list[bytes]) -> int:
    try:
        produce(conn, topic, partition, values)
    except AssertionError as e:
        return int(ErrorCode[str(e).rsplit(": ", 1)[1]])
    return 0


def fetch_values(conn: Raw, topic: str, partition: int) -> list[bytes]:
    resp = conn.request(FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=50_000_000, topics=[FetchTopic(
        topic=topic, partitions=[FetchPartition(partition=partition, fetch_offset=0,
                                                partition_max_bytes=10_000_000)])]), 11)
    assert isinstance(resp, FetchResponse)
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0, ErrorCode(p.error_code).name
    return [r.value for _, recs in decode_batches(bytes(p.records or b"")) for r in recs if r.value is not None]


def earliest(conn: Raw, topic: str) -> int:
    r = conn.request(ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(name=topic, partitions=[
        ListOffsetsPartition(partition_index=0, timestamp=-2)])]), 4)
    assert isinstance(r, ListOffsetsResponse) and r.topics[0].partitions[0].error_code == 0
    return r.topics[0].partitions[0].offset


# ---- CreatePartitions ----------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_create_partitions_grows_the_topic_and_new_partitions_take_data(conn: Raw, version: int) -> None:
    t = unique_topic(f"grow-v{version}")
    create(conn, t, 2)
    produce(conn, t, 1, [b"before"])
    assert grow(conn, (t, 5), version=version) == {t: (0, None)}
    assert partition_count(conn, t) == 5  # visible in Metadata at once, every partition led by us
    for p in range(5):
        assert produce(conn, t, p, [b"p%d" % p]) == (1 if p == 1 else 0)
    assert fetch_values(conn, t, 4) == [b"p4"]
    assert fetch_values(conn, t, 1) == [b"before", b"p1"]  # the old partitions keep their data


def test_create_partitions_validate_only_changes_nothing(conn: Raw) -> None:
    t = unique_topic("grow-validate")
    create(conn, t, 2)
    assert grow(conn, (t, 4), validate_only=True) == {t: (0, None)}
    assert partition_count(conn, t) == 2
    # errors are still reported when only validating
    assert grow(conn, (t, 1), validate_only=True)[t][0] == ErrorCode.INVALID_PARTITIONS
    assert grow(conn, ("no-such-topic-v", 4), validate_only=True)["no-such-topic-v"][0] == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert partition_count(conn, t) == 2


def test_create_partitions_refusals(conn: Raw) -> None:
    t = unique_topic("grow-errors")
    create(conn, t, 3)
    missing = unique_topic("grow-missing")
    got = grow(conn, (missing, 4), (t, 2))
    assert got[missing] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{missing}' does not exist.")
    assert got[t] == (ErrorCode.INVALID_PARTITIONS, "Topic currently has 3 partitions, which is higher than the "
                                                    "requested 2.")
    assert grow(conn, (t, 3))[t] == (ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partitions.")

    # explicit assignments: one replica list per new partition, naming only this broker
    code, msg = grow(conn, (t, 5, [[NODE_ID]]))[t]
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "2 additional partition(s)" in (msg or "")
    code, msg = grow(conn, (t, 4, [[7]]))[t]
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "broker 7" in (msg or "")
    assert grow(conn, (t, 4, [[NODE_ID, NODE_ID]]))[t][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert grow(conn, (t, 4, [[]]))[t][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert partition_count(conn, t) == 3

    # a topic named twice: one INVALID_REQUEST answer, and neither entry applied
    other = unique_topic("grow-other")
    create(conn, other, 1)
    got = grow(conn, (t, 4), (other, 2), (t, 5))
    assert got == {t: (ErrorCode.INVALID_REQUEST, "Duplicate topic name."), other: (0, None)}
    assert partition_count(conn, t) == 3 and partition_count(conn, other) == 2

    # a valid explicit assignment works
    assert grow(conn, (t, 4, [[NODE_ID]])) == {t: (0, None)}
    assert partition_count(conn, t) == 4


def _find_txn_coordinator(conn: Raw, tid: str) -> None:
    resp = conn.request(FindCoordinatorRequest(key=tid, key_type=1), 3)
    assert isinstance(resp, FindCoordinatorResponse) and resp.error_code == 0, resp


def test_transaction_state_topic_is_created_on_first_coordinator_lookup(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory()
    c = Raw(b.port)
    md = c.request(MetadataRequest(topics=[MetadataRequestTopic(name="__transaction_state")],
                                   allow_auto_topic_creation=False), 12)
    assert isinstance(md, MetadataResponse) and md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert not list(b.data_dir.glob("__transaction_state-*"))
    _find_txn_coordinator(c, unique_topic("tx-first"))
    assert partition_count(c, "__transaction_state") == 50
    c.close()
    b.restart(kill=True)
    c = Raw(b.port)
    assert partition_count(c, "__transaction_state") == 50
    c.close()


def test_create_partitions_refuses_internal_topics(conn: Raw) -> None:
    _find_txn_coordinator(conn, unique_topic("tx-internal"))  # __transaction_state exists from then on
    n = partition_count(conn, "__transaction_state")
    code, msg = grow(conn, ("__transaction_state", n + 1))["__transaction_state"]
    assert code == ErrorCode.INVALID_REQUEST and "internal topic" in (msg or "")
    assert partition_count(conn, "__transaction_state") == n


# ---- IncrementalAlterConfigs ---------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1])
def test_incremental_set_and_delete_show_in_describe_configs(conn: Raw, version: int) -> None:
    t = unique_topic(f"incr-v{version}")
    create(conn, t, 1, {"segment.bytes": "1048576"})
    defaults = describe(conn, t)
    assert incremental(conn, (TOPIC, t, [("retention.ms", SET, "3600000"), ("max.message.bytes", SET, "2000")]),
                       version=version) == [(0, None)]
    after = describe(conn, t)
    assert after["retention.ms"] == ("3600000", SOURCE_TOPIC)
    assert after["max.message.bytes"] == ("2000", SOURCE_TOPIC)
    assert after["segment.bytes"] == ("1048576", SOURCE_TOPIC)  # untouched: incremental
    assert incremental(conn, (TOPIC, t, [("retention.ms", DELETE, None), ("flush.ms", DELETE, None)]),
                       version=version) == [(0, None)]
    after = describe(conn, t)
    assert after["retention.ms"] == defaults["retention.ms"] and after["retention.ms"][1] == SOURCE_DEFAULT
    assert overrides(conn, t) == {"max.message.bytes": "2000", "segment.bytes": "1048576"}


def test_incremental_append_and_subtract_only_on_list_configs(conn: Raw) -> None:
    t = unique_topic("incr-list")
    create(conn, t, 1)
    # APPEND starts from the default ("delete") when there is no override; duplicates are not added
    assert incremental(conn, (TOPIC, t, [("cleanup.policy", APPEND, "delete")])) == [(0, None)]
    assert overrides(conn, t) == {"cleanup.policy": "delete"}
    assert incremental(conn, (TOPIC, t, [("cleanup.policy", SET, "compact")])) == [(0, None)]
    assert incremental(conn, (TOPIC, t, [("cleanup.policy", SUBTRACT, "delete")])) == [(0, None)]
    assert overrides(conn, t) == {"cleanup.policy": "compact"}
    # both policies at once, as Kafka allows; an unknown one is refused and changes nothing
    assert incremental(conn, (TOPIC, t, [("cleanup.policy", APPEND, "delete")])) == [(0, None)]
    assert overrides(conn, t) == {"cleanup.policy": "compact,delete"}
    [(code, _msg)] = incremental(conn, (TOPIC, t, [("cleanup.policy", APPEND, "shred")]))
    assert code == ErrorCode.INVALID_CONFIG
    assert overrides(conn, t) == {"cleanup.policy": "compact,delete"}
    # not a list
    [(code, msg)] = incremental(conn, (TOPIC, t, [("retention.ms", APPEND, "5")]))
    assert (code, msg) == (ErrorCode.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST.")
    [(code, msg)] = incremental(conn, (TOPIC, t, [("segment.bytes", SUBTRACT, "5")]))
    assert code == ErrorCode.INVALID_CONFIG and "SUBTRACT" in (msg or "")


def test_incremental_validate_only_changes_nothing(conn: Raw) -> None:
    t = unique_topic("incr-validate")
    create(conn, t, 1, {"retention.ms": "60000"})
    assert incremental(conn, (TOPIC, t, [("retention.ms", DELETE, None), ("segment.bytes", SET, "4096")]),
                       validate_only=True) == [(0, None)]
    assert overrides(conn, t) == {"retention.ms": "60000"}
    [(code, _)] = incremental(conn, (TOPIC, t, [("segment.bytes", SET, "nope")]), validate_only=True)
    assert code == ErrorCode.INVALID_CONFIG


def test_incremental_refusals_per_resource(conn: Raw) -> None:
    t = unique_topic("incr-errors")
    create(conn, t, 1)
    missing = unique_topic("incr-missing")
    results = incremental(
        conn,
        (TOPIC, missing, [("retention.ms", SET, "1")]),
        (TOPIC, t, [("no.such.config", SET, "1")]),
        (TOPIC, t + "-b", [("retention.ms", SET, "1")]),
        (BROKER, str(NODE_ID), [("num.partitions", SET, "1")]),  # static: not a dynamic broker config
        (BROKER, "", [("log.retention.ms", SET, "soon")]),
        (BROKER_LOGGER, str(NODE_ID), [("root", SET, "DEBUG")]),
        (99, "x", [("a", SET, "1")]),
    )
    assert results[0] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{missing}' does not exist.")
    assert results[1] == (ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such.config")
    assert results[2][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results[3][0] == ErrorCode.INVALID_CONFIG and "Cannot update these configs dynamically" in (results[3][1] or "")
    assert results[4] == (ErrorCode.INVALID_CONFIG,
                          "Invalid value soon for configuration retention.ms: Not a number of type LONG")
    assert results[5][0] == ErrorCode.INVALID_REQUEST and "not supported" in (results[5][1] or ""), results[5]
    assert results[6] == (ErrorCode.INVALID_REQUEST, "Unknown resource type 99")

    def one(ops: list[tuple[str, int, str | None]]) -> tuple[int, str | None]:
        return incremental(conn, (TOPIC, t, ops))[0]

    assert one([("retention.ms", SET, "soon")]) == (
        ErrorCode.INVALID_CONFIG, "Invalid value soon for configuration retention.ms: Not a number of type LONG")
    assert one([("segment.bytes", SET, "10")])[0] == ErrorCode.INVALID_CONFIG  # below the 14-byte minimum
    assert one([("compression.type", SET, "brotli")])[0] == ErrorCode.INVALID_CONFIG
    assert one([("max.message.bytes", SET, "-1")])[0] == ErrorCode.INVALID_CONFIG
    assert one([("retention.ms", SET, None)]) == (ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms")
    assert one([("retention.ms", SET, "1"), ("retention.ms", DELETE, None)]) == (
        ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    assert one([("retention.ms", 7, "1")]) == (ErrorCode.INVALID_REQUEST, "Unknown operations type 7")
    # one bad key refuses the whole resource
    assert one([("retention.ms", SET, "1000"), ("segment.ms", SET, "x")])[0] == ErrorCode.INVALID_CONFIG
    # a resource named twice: both refused
    assert incremental(conn, (TOPIC, t, [("retention.ms", SET, "1")]), (TOPIC, t, [("segment.ms", SET, "1")])) == [
        (ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")] * 2
    assert overrides(conn, t) == {}


# ---- AlterConfigs --------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_configs_replaces_all_overrides(conn: Raw, version: int) -> None:
    t = unique_topic(f"legacy-v{version}")
    create(conn, t, 1, {"retention.ms": "60000", "segment.bytes": "1048576"})
    assert legacy(conn, (TOPIC, t, {"max.message.bytes": "5000", "retention.ms": "120000"}),
                  version=version) == [(0, None)]
    after = describe(conn, t)
    assert overrides(conn, t) == {"max.message.bytes": "5000", "retention.ms": "120000"}
    assert after["segment.bytes"][1] == SOURCE_DEFAULT  # not named: back to the default
    assert legacy(conn, (TOPIC, t, {}), version=version) == [(0, None)]
    assert overrides(conn, t) == {}


def test_alter_configs_validate_only_and_refusals(conn: Raw) -> None:
    t = unique_topic("legacy-errors")
    create(conn, t, 1, {"retention.ms": "60000"})
    assert legacy(conn, (TOPIC, t, {"segment.ms": "1000"}), validate_only=True) == [(0, None)]
    assert overrides(conn, t) == {"retention.ms": "60000"}
    missing = unique_topic("legacy-missing")
    results = legacy(
        conn,
        (TOPIC, missing, {"retention.ms": "1"}),
        (TOPIC, t, {"retention.ms": None}),
        (BROKER, str(NODE_ID), {"num.partitions": "1"}),
        (BROKER, "7", {"log.retention.ms": "1"}),
        (0, "x", {}),
    )
    assert results[0][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results[1] == (ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms")
    assert results[2][0] == ErrorCode.INVALID_CONFIG and "Cannot update these configs dynamically" in (results[2][1] or "")
    assert results[3] == (ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1, but received 7")
    assert results[4] == (ErrorCode.INVALID_REQUEST, "Unknown resource type 0")
    assert legacy(conn, (TOPIC, t, {"bogus": "1"}))[0] == (ErrorCode.INVALID_CONFIG, "Unknown topic config name: bogus")
    assert overrides(conn, t) == {"retention.ms": "60000"}


# ---- configs act on the running logs -------------------------------------------------------------

def test_max_message_bytes_applies_to_the_next_produce(conn: Raw) -> None:
    t = unique_topic("applied-max")
    create(conn, t, 1)
    big = [b"x" * 3000]
    assert produce_code(conn, t, 0, big) == 0
    assert incremental(conn, (TOPIC, t, [("max.message.bytes", SET, "1000")])) == [(0, None)]
    assert produce_code(conn, t, 0, big) == ErrorCode.MESSAGE_TOO_LARGE
    assert legacy(conn, (TOPIC, t, {})) == [(0, None)]  # back to the broker default
    assert produce_code(conn, t, 0, big) == 0


def _segments(broker: BrokerProcess, topic: str, partition: int = 0) -> int:
    return len(list((Path(broker.data_dir) / f"{topic}-{partition}").glob("*.log")))


def test_segment_bytes_and_retention_apply_to_the_running_log(broker_factory) -> None:
    b = broker_factory(env={"KETCH_LOG_RETENTION_CHECK_INTERVAL_MS": "100"})
    conn = Raw(b.port)
    try:
        t = unique_topic("applied-seg")
        create(conn, t, 1)
        hour_ago = int(time.time() * 1000) - 3_600_000
        for _ in range(5):
            produce(conn, t, 0, [b"v" * 400], ts=hour_ago)
        assert _segments(b, t) == 1  # the default segment.bytes is 1 GiB
        assert incremental(conn, (TOPIC, t, [("segment.bytes", SET, "1024")])) == [(0, None)]
        for _ in range(15):
            produce(conn, t, 0, [b"v" * 400], ts=hour_ago)
        assert _segments(b, t) >= 5  # about two ~450-byte batches per 1 KiB segment
        assert earliest(conn, t) == 0  # a week of retention by default: nothing deleted yet
        assert incremental(conn, (TOPIC, t, [("retention.ms", SET, "60000")])) == [(0, None)]
        wait_until(lambda: earliest(conn, t) > 0, timeout=15, message="retention to delete old segments")
        assert _segments(b, t) < 5
    finally:
        conn.close()


# ---- durability ----------------------------------------------------------------------------------

@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_partitions_and_configs_survive_restart(broker_factory, kill: bool) -> None:
    b = broker_factory(env={"KETCH_FLUSH_MESSAGES": "1"})
    t = unique_topic("durable")
    conn = Raw(b.port)
    try:
        create(conn, t, 1, {"retention.ms": "60000"})
        assert grow(conn, (t, 3)) == {t: (0, None)}
        produce(conn, t, 2, [b"in-new-partition"])
        # last before the restart, so that nothing after it writes the topic table again (and in
        # the second round the other way round)
        assert incremental(conn, (TOPIC, t, [("segment.bytes", SET, "2048"), ("retention.ms", DELETE, None)])) == \
            [(0, None)]
    finally:
        conn.close()
    b.restart(kill=kill)
    conn = Raw(b.port)
    try:
        assert partition_count(conn, t) == 3
        assert overrides(conn, t) == {"segment.bytes": "2048"}
        assert fetch_values(conn, t, 2) == [b"in-new-partition"]
        # a second round, then the other kind of restart
        assert legacy(conn, (TOPIC, t, {"max.message.bytes": "3000"})) == [(0, None)]
        assert grow(conn, (t, 4)) == {t: (0, None)}
        produce(conn, t, 3, [b"later"])
    finally:
        conn.close()
    b.restart(kill=not kill)
    conn = Raw(b.port)
    try:
        assert partition_count(conn, t) == 4
        assert overrides(conn, t) == {"max.message.bytes": "3000"}
        assert fetch_values(conn, t, 2) == [b"in-new-partition"] and fetch_values(conn, t, 3) == [b"later"]
        assert produce_code(conn, t, 3, [b"y" * 4000]) == ErrorCode.MESSAGE_TOO_LARGE  # applied after reload
    finally:
        conn.close()


# ---- the bundled client's Admin ------------------------------------------------------------------

async def test_bundled_admin_create_partitions_and_incremental_alter_configs(broker: BrokerProcess) -> None:
    t = unique_topic("admin")
    async with Admin(broker.bootstrap) as admin:
        await admin.create_topic(t, 2)
        assert await admin.create_partitions({t: 4}, validate_only=True) == {t: None}
        assert await admin.create_partitions({t: 4}) == {t: None}
        assert len((await admin.describe_topics([t]))[t].partitions) == 4
        err = (await admin.create_partitions({t: 3}))[t]
        assert err is not None and err.code == ErrorCode.INVALID_PARTITIONS
        assert await admin.incremental_alter_configs({t: [
            AlterConfigOp("retention.ms", "7200000"), AlterConfigOp("cleanup.policy", "delete", CONFIG_APPEND),
            AlterConfigOp("flush.ms", op=CONFIG_DELETE)]}) == {t: None}
        err = (await admin.incremental_alter_configs({t: [AlterConfigOp("retention.ms", "x")]}))[t]
        assert err is not None and err.code == ErrorCode.INVALID_CONFIG
    conn = Raw(broker.port)
    try:
        assert overrides(conn, t) == {"retention.ms": "7200000", "cleanup.policy": "delete"}
    finally:
        conn.close()
