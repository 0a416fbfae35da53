"""The broker's network behaviour against a real process: ordering, long polls, many clients,
clean shutdown, and the Fetch/ListOffsets answers clients depend on."""

from __future__ import annotations

import signal
import threading
import time

import pytest
from helpers import BrokerProcess, wait_until
from helpers.raw import Raw

from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.records import build_batch_from_messages, decode_batches


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """These tests share one broker (unique topics each); `conn` (tests/conftest.py) talks to it."""
    return module_broker


def create(conn: Raw, name: str, partitions: int = 1) -> None:
    resp = conn.request(CreateTopicsRequest(topics=[CreatableTopic(name=name, num_partitions=partitions,
                                                                   replication_factor=-1)], timeout_ms=5000), 5)
    assert isinstance(resp, CreateTopicsResponse) and resp.topics[0].error_code == 0
    assert resp.topics[0].num_partitions == partitions


def produce(conn: Raw, topic: str, values: list[bytes], partition: int = 0, **kw: int) -> int:
    batch = build_batch_from_messages([(None, v, [], None) for v in values], **kw)
    resp = conn.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=partition, records=batch)])]), 9)
    assert isinstance(resp, ProduceResponse)
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == 0
    return p.base_offset


def fetch_req(topic: str, offset: int, *, wait_ms: int = 0, min_bytes: int = 1, isolation: int = 0,
              topic_id: object = None) -> FetchRequest:
    return FetchRequest(max_wait_ms=wait_ms, min_bytes=min_bytes, max_bytes=50_000_000, isolation_level=isolation,
                        topics=[FetchTopic(topic=topic, topic_id=topic_id, partitions=[FetchPartition(
                            partition=0, fetch_offset=offset, partition_max_bytes=1_000_000)])])


def values_of(resp: FetchResponse) -> list[bytes]:
    data = resp.responses[0].partitions[0].records
    return [r.value for _, recs in decode_batches(bytes(data or b"")) for r in recs if r.value is not None]


def test_pipelined_requests_answered_in_order(conn: Raw) -> None:
    create(conn, "pipe")
    # a long poll first, then quick requests behind it: answers must still come in request order
    first = conn.send(fetch_req("pipe", 0, wait_ms=1500), 11)
    rest = [conn.send(ApiVersionsRequest(), 3) for _ in range(5)]
    meta = conn.send(MetadataRequest(topics=None), 9)
    got = [conn.receive(FetchRequest, 11)[0]]
    got += [conn.receive(ApiVersionsRequest, 3)[0] for _ in range(5)]
    got.append(conn.receive(MetadataRequest, 9)[0])
    assert got == [first, *rest, meta]


def test_long_poll_fetch_wakes_on_produce(broker: BrokerProcess, conn: Raw) -> None:
    create(conn, "longpoll")
    result: dict[str, object] = {}

    def poll() -> None:
        c = Raw(broker.port)
        try:
            start = time.monotonic()
            result["resp"] = c.request(fetch_req("longpoll", 0, wait_ms=30_000), 11)
            result["elapsed"] = time.monotonic() - start
        finally:
            c.close()

    t = threading.Thread(target=poll)
    t.start()
    # the fetch is parked in the broker before we produce: wait until it shows up as a connection
    wait_until(lambda: t.is_alive(), timeout=5)
    produce(conn, "longpoll", [b"wake"])
    t.join(timeout=40)
    assert not t.is_alive()
    resp = result["resp"]
    assert isinstance(resp, FetchResponse)
    assert values_of(resp) == [b"wake"]
    assert float(result["elapsed"]) < 25  # woken by the produce, not by the 30 s max wait  # type: ignore[arg-type]


def test_min_bytes_not_reached_returns_at_max_wait_with_what_there_is(conn: Raw) -> None:
    create(conn, "minbytes")
    produce(conn, "minbytes", [b"a"])
    resp = conn.request(fetch_req("minbytes", 0, wait_ms=200, min_bytes=10_000_000), 11)
    assert isinstance(resp, FetchResponse)
    assert values_of(resp) == [b"a"]


def test_many_connections(broker: BrokerProcess) -> None:
    conns = [Raw(broker.port) for _ in range(200)]
    try:
        ids = [c.send(ApiVersionsRequest(), 3) for c in conns]
        for c, cid in zip(conns, ids, strict=True):
            corr, resp = c.receive(ApiVersionsRequest, 3)
            assert corr == cid and isinstance(resp, ApiVersionsResponse) and resp.error_code == 0
    finally:
        for c in conns:
            c.close()


def test_offsets_fetch_by_topic_id_and_list_offsets(conn: Raw) -> None:
    create(conn, "ids")
    t0 = int(time.time() * 1000) - 10_000
    first = build_batch_from_messages([(None, b"a", [], t0), (None, b"b", [], t0 + 1)])
    resp = conn.request(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[TopicProduceData(
        name="ids", partition_data=[PartitionProduceData(index=0, records=first)])]), 3)
    assert isinstance(resp, ProduceResponse) and resp.responses[0].partition_responses[0].base_offset == 0
    batch_ts = t0 + 5_000
    # a batch with explicit timestamps to look up by time
    batch = build_batch_from_messages([(None, b"c", [], batch_ts), (None, b"d", [], batch_ts + 1)])
    resp = conn.request(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[TopicProduceData(
        name="ids", partition_data=[PartitionProduceData(index=0, records=batch)])]), 3)
    assert isinstance(resp, ProduceResponse) and resp.responses[0].partition_responses[0].base_offset == 2

    md = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name="ids")]), 12)
    assert isinstance(md, MetadataResponse)
    topic_id = md.topics[0].topic_id
    assert topic_id is not None and topic_id.int != 0
    f = conn.request(fetch_req("", 0, topic_id=topic_id), 13)
    assert isinstance(f, FetchResponse)
    assert values_of(f) == [b"a", b"b", b"c", b"d"]
    assert f.responses[0].partitions[0].high_watermark == 4

    def lo(ts: int) -> int:
        r = conn.request(ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(name="ids", partitions=[
            ListOffsetsPartition(partition_index=0, timestamp=ts)])]), 4)
        assert isinstance(r, ListOffsetsResponse) and r.topics[0].partitions[0].error_code == 0
        return r.topics[0].partitions[0].offset

    assert lo(-2) == 0
    assert lo(-1) == 4
    assert lo(t0 + 1) == 1
    assert lo(t0 + 2) == 2
    assert lo(batch_ts + 1) == 3
    assert lo(int(time.time() * 1000) + 3_600_000) == -1


def test_read_committed_fetch_bounded_by_lso(conn: Raw) -> None:
    create(conn, "lso")
    produce(conn, "lso", [b"x"])
    resp = conn.request(fetch_req("lso", 0, isolation=1), 11)
    assert isinstance(resp, FetchResponse)
    p = resp.responses[0].partitions[0]
    assert p.last_stable_offset == 1 and p.aborted_transactions == []
    assert values_of(resp) == [b"x"]


def test_fetch_out_of_range(conn: Raw) -> None:
    create(conn, "oor")
    resp = conn.request(fetch_req("oor", 5), 11)
    assert isinstance(resp, FetchResponse)
    assert resp.responses[0].partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE


def test_delete_topic(conn: Raw) -> None:
    create(conn, "gone")
    produce(conn, "gone", [b"x"])
    resp = conn.request(DeleteTopicsRequest(topic_names=["gone", "never-was"], timeout_ms=5000), 4)
    assert isinstance(resp, DeleteTopicsResponse)
    assert [(r.name, r.error_code) for r in resp.responses] == [("gone", 0), ("never-was", 3)]
    md = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name="gone")], allow_auto_topic_creation=False), 4)
    assert isinstance(md, MetadataResponse) and md.topics[0].error_code == 3


def test_sigint_shuts_down_cleanly_and_data_survives(tmp_path_factory: pytest.TempPathFactory) -> None:
    b = BrokerProcess(tmp_path_factory.mktemp("sigint") / "data")
    b.start()
    try:
        c = Raw(b.port)
        create(c, "keep")
        produce(c, "keep", [b"1", b"2"])
        c.close()
        assert b.proc is not None
        b.proc.send_signal(signal.SIGINT)
        wait_until(lambda: b.proc is not None and b.proc.poll() is not None, timeout=20)
        assert b.proc.returncode == 0
        log = open(b.log_path, errors="replace").read()
        assert "broker stopped" in log and "Traceback" not in log
        b.start()
        c = Raw(b.port)
        resp = c.request(fetch_req("keep", 0), 11)
        assert isinstance(resp, FetchResponse) and values_of(resp) == [b"1", b"2"]
        c.close()
    finally:
        b.stop()
