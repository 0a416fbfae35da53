"""Several log directories (log_dirs, Kafka's log.dirs) on a real broker: where its own files go,
where partitions are found at start and placed when created."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers import BrokerProcess, make_messages, unique_topic
from helpers.confluent import consume_all, create_topic, produce
from helpers.raw import Raw

from broker.log_dirs import read_properties
from protocol.errors import ErrorCode
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.records import build_batch_from_messages


def two_dirs(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    a, b = tmp_path / "disk-a", tmp_path / "disk-b"
    return a, b, {"KETCH_LOG_DIRS": f"{a},{b}"}


def partition_dirs(d: Path, topic: str) -> set[str]:
    return {p.name for p in d.iterdir() if p.name.startswith(f"{topic}-")} if d.exists() else set()


def test_every_log_dir_is_the_brokers_and_each_ones_partitions_load_at_start(tmp_path: Path) -> None:
    """meta.properties in each directory (one cluster and node, a directory id each), the metadata
    log in the first (Kafka's metadata.log.dir default), nothing in --data-dir (log.dirs wins);
    after a restart the partitions of both directories are found where they are, not created anew."""
    a, b, env = two_dirs(tmp_path)
    unused = tmp_path / "data"
    broker = BrokerProcess(unused, env=env, log_path=tmp_path / "broker.log")
    try:
        broker.start()
        props = [read_properties((d / "meta.properties").read_bytes()) for d in (a, b)]
        assert [(p["cluster.id"], p["node.id"]) for p in props] == [("ketch-cluster", "1")] * 2
        assert props[0]["directory.id"] != props[1]["directory.id"]
        assert (a / "__cluster_metadata-0").is_dir() and not (b / "__cluster_metadata-0").exists()
        assert list(unused.iterdir()) == []  # log_dirs replaces the single data directory

        topic = unique_topic("ld-load")
        create_topic(broker.bootstrap, topic, 4)
        msgs = make_messages(400)
        produce(broker.bootstrap, topic, msgs)
        broker.stop()
        # An operator moves two partitions to the other disk while the broker is down.
        for i in range(4):
            src = a / f"{topic}-{i}" if (a / f"{topic}-{i}").exists() else b / f"{topic}-{i}"
            dst = (b if src.parent == a else a) / src.name
            if i % 2 == 0:
                shutil.move(str(src), str(dst))
        before = {d: partition_dirs(d, topic) for d in (a, b)}
        broker.start()
        read = consume_all(broker.bootstrap, topic, 4)
        assert sorted(r.value for r in read) == sorted(m.value for m in msgs)
        assert {d: partition_dirs(d, topic) for d in (a, b)} == before  # found, not created again
    finally:
        broker.close()


def test_new_partitions_go_to_the_log_dir_holding_the_fewest(tmp_path: Path) -> None:
    """Kafka's placement: each new replica to the directory with the fewest partitions, the first
    listed on a tie."""
    a, b, env = two_dirs(tmp_path)
    broker = BrokerProcess(tmp_path / "data", env=env, log_path=tmp_path / "broker.log")
    try:
        broker.start()
        first, second = unique_topic("ld-place"), unique_topic("ld-place")
        create_topic(broker.bootstrap, first, 5)
        assert (partition_dirs(a, first), partition_dirs(b, first)) == (
            {f"{first}-0", f"{first}-2", f"{first}-4"}, {f"{first}-1", f"{first}-3"})
        create_topic(broker.bootstrap, second, 3)  # b holds fewer (2 against 3), then they tie
        assert (partition_dirs(a, second), partition_dirs(b, second)) == (
            {f"{second}-1"}, {f"{second}-0", f"{second}-2"})
    finally:
        broker.close()


def test_describe_log_dirs_reports_every_dir_and_one_that_cannot_be_used_as_a_storage_error(tmp_path: Path) -> None:
    """One result per log directory with its own partitions and its volume's space; a directory
    that could not be used at start (here a file stands where it should be) is reported with
    KAFKA_STORAGE_ERROR, and the broker serves from the others."""
    a, b, _ = two_dirs(tmp_path)
    broken = tmp_path / "disk-c"
    broken.write_bytes(b"not a directory")
    broker = BrokerProcess(tmp_path / "data", env={"KETCH_LOG_DIRS": f"{a},{broken},{b}"},
                           log_path=tmp_path / "broker.log")
    try:
        broker.start()
        topic = unique_topic("ld-describe")
        create_topic(broker.bootstrap, topic, 2)
        acks = produce(broker.bootstrap, topic, make_messages(50))
        assert {p for p, _ in acks.values()} == {0, 1}
        conn = Raw(broker.port)
        try:
            resp = conn.request(DescribeLogDirsRequest(topics=None), 4)
        finally:
            conn.close()
        assert isinstance(resp, DescribeLogDirsResponse) and resp.error_code == 0
        by_dir = {r.log_dir: r for r in resp.results}
        assert list(by_dir) == [str(a), str(broken), str(b)]  # as configured
        assert by_dir[str(broken)].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert by_dir[str(broken)].topics == []
        held = {}
        for d in (a, b):
            r = by_dir[str(d)]
            assert r.error_code == 0 and 0 < r.usable_bytes <= r.total_bytes
            held[d] = {(t.name, p.partition_index): p.partition_size for t in r.topics for p in t.partitions
                       if t.name == topic}
        assert set(held[a]) == {(topic, 0)} and set(held[b]) == {(topic, 1)}
        assert all(size > 0 for sizes in held.values() for size in sizes.values())
    finally:
        broker.close()


def test_a_dir_missing_at_start_leaves_its_partitions_offline_not_recreated_empty(tmp_path: Path) -> None:
    """A disk that does not come back at a restart: its partitions answer KAFKA_STORAGE_ERROR
    rather than starting over empty in the other directory (a leader with an empty log would
    lose them), the rest serve; once the disk is back, so are they, data and all."""
    a, b, env = two_dirs(tmp_path)
    broker = BrokerProcess(tmp_path / "data", env=env, log_path=tmp_path / "broker.log")
    try:
        broker.start()
        topic = unique_topic("ld-missing")
        create_topic(broker.bootstrap, topic, 2)
        msgs = make_messages(100)
        produce(broker.bootstrap, topic, msgs)
        broker.stop()
        shutil.move(str(b), str(tmp_path / "unplugged"))
        b.write_bytes(b"the mount point of a disk that is not there")
        broker.start()
        conn = Raw(broker.port)
        try:
            resp = conn.request(DescribeLogDirsRequest(topics=None), 4)
            assert isinstance(resp, DescribeLogDirsResponse)
            assert {r.log_dir: r.error_code for r in resp.results} == {str(a): 0, str(b): ErrorCode.KAFKA_STORAGE_ERROR}
            codes = {p: produce_code(conn, topic, p) for p in (0, 1)}
        finally:
            conn.close()
        assert codes == {0: 0, 1: ErrorCode.KAFKA_STORAGE_ERROR}
        assert partition_dirs(a, topic) == {f"{topic}-0"}  # not created again where it is not
        broker.stop()
        b.unlink()
        shutil.move(str(tmp_path / "unplugged"), str(b))
        broker.start()
        values = sorted(r.value for r in consume_all(broker.bootstrap, topic, 2, check_watermarks=False))
        assert values == sorted([m.value for m in msgs] + [b"probe"])
    finally:
        broker.close()


def produce_code(conn: Raw, topic: str, partition: int) -> int:
    resp = conn.request(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(
            index=partition, records=build_batch_from_messages([(None, b"probe", [], None)]))])]), 9)
    assert isinstance(resp, ProduceResponse)
    return resp.responses[0].partition_responses[0].error_code
