"""DescribeLogDirs against a real broker, on the wire: one log directory (the data dir), the bytes
each partition holds on disk, the topic filter, and the volume's space from v4. (Sizes after
DeleteRecords removes segments: test_delete_records.py.)"""

from __future__ import annotations

import os

import pytest
from helpers import BrokerProcess, unique_topic
from helpers.raw import Raw

from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.describe_log_dirs import (
    DescribableLogDirTopic,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
)
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.records import build_batch_from_messages


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker


def create(conn: Raw, name: str, partitions: int) -> None:
    resp = conn.request(CreateTopicsRequest(topics=[CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=-1)], timeout_ms=5000), 5)
    assert resp is not None and resp.topics[0].error_code == 0, resp  # type: ignore[attr-defined]


def produce(conn: Raw, topic: str, partition: int, values: list[bytes]) -> int:
    """Bytes written: the batch as sent is the batch as stored."""
    records = build_batch_from_messages([(None, v, [], None) for v in values])
    resp = conn.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=partition, records=records)])]), 9)
    assert isinstance(resp, ProduceResponse)
    assert resp.responses[0].partition_responses[0].error_code == 0
    return len(records)


def describe(conn: Raw, topics: list[DescribableLogDirTopic] | None, version: int = 4) -> DescribeLogDirsResult:
    resp = conn.request(DescribeLogDirsRequest(topics=topics), version)
    assert isinstance(resp, DescribeLogDirsResponse)
    assert resp.error_code == 0
    (result,) = resp.results  # one data directory
    assert result.error_code == 0
    return result


def sizes(result: DescribeLogDirsResult) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_sizes_match_what_was_written(broker: BrokerProcess, conn: Raw, version: int) -> None:
    t = unique_topic(f"ld-v{version}")
    create(conn, t, 3)
    written = {0: produce(conn, t, 0, [b"a" * 100]) + produce(conn, t, 0, [b"b" * 10, b"c"]),
               2: produce(conn, t, 2, [b"d" * 1000])}
    result = describe(conn, [DescribableLogDirTopic(topic=t, partitions=[0, 1, 2])], version)
    assert result.log_dir == os.path.abspath(broker.data_dir)
    assert sizes(result) == {(t, 0): written[0], (t, 1): 0, (t, 2): written[2]}
    for topic in result.topics:
        for p in topic.partitions:
            assert p.offset_lag == 0 and p.is_future_key is False  # a leader's log, the current one
    if version >= 4:
        assert 0 < result.usable_bytes <= result.total_bytes
        st = os.statvfs(broker.data_dir)
        assert result.total_bytes == st.f_blocks * st.f_frsize
    else:
        assert result.total_bytes == result.usable_bytes == -1  # not on the wire before v4


def test_topic_filter(conn: Raw) -> None:
    a, b = unique_topic("ld-a"), unique_topic("ld-b")
    create(conn, a, 3)
    create(conn, b, 1)
    produce(conn, a, 1, [b"x"])
    size_b = produce(conn, b, 0, [b"y" * 50])

    only = describe(conn, [DescribableLogDirTopic(topic=a, partitions=[1, 2])])
    assert set(sizes(only)) == {(a, 1), (a, 2)}
    # partitions and topics that do not exist are left out, and so is a topic with none left
    missing = unique_topic("ld-missing")
    some = describe(conn, [DescribableLogDirTopic(topic=a, partitions=[0, 7]),
                           DescribableLogDirTopic(topic=missing, partitions=[0]),
                           DescribableLogDirTopic(topic=b, partitions=[3])])
    assert set(sizes(some)) == {(a, 0)}
    assert describe(conn, []).topics == []

    everything = sizes(describe(conn, None))
    assert {(a, 0), (a, 1), (a, 2), (b, 0)} <= set(everything)
    assert everything[(b, 0)] == size_b

