"""DeleteRecords against a real broker, on the wire.

The log start moves to the requested offset (inside a segment, or past whole segments, which go
from disk), -1 means the high watermark, each refusal gets Kafka's code, fetches below the new
start get OFFSET_OUT_OF_RANGE (a parked one at once), ListOffsets earliest follows, and the new
start survives a SIGKILL.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from helpers import BrokerProcess, unique_topic
from helpers.raw import Raw

from protocol.errors import ErrorCode
from protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopic,
)
from protocol.messages.describe_log_dirs import (
    DescribableLogDirTopic,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    TopicRequest,
)
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic, PartitionData
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.records import build_batch_from_messages, decode_batches

RECORDS_PER_BATCH = 5
BATCHES_PER_SEGMENT = 3


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Most tests share one broker (unique topics each); `conn` (tests/conftest.py) talks to it."""
    return module_broker


# ---- wire helpers --------------------------------------------------------------------------------

def batch(first: int) -> bytes:
    """RECORDS_PER_BATCH records whose values are their offsets (all batches are the same size)."""
    return build_batch_from_messages([(None, b"v%05d" % (first + i), [], 1_700_000_000_000)
                                      for i in range(RECORDS_PER_BATCH)])


BATCH_SIZE = len(batch(0))


def create(conn: Raw, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    resp = conn.request(CreateTopicsRequest(topics=[CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=-1,
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])], timeout_ms=5000), 5)
    assert resp is not None and resp.topics[0].error_code == 0, resp  # type: ignore[attr-defined]


def create_segmented(conn: Raw, batches: int) -> str:
    """A one-partition topic holding `batches` batches, BATCHES_PER_SEGMENT to a segment."""
    t = unique_topic("dr")
    create(conn, t, configs={"segment.bytes": str(BATCH_SIZE * BATCHES_PER_SEGMENT)})
    for i in range(batches):
        assert produce(conn, t, 0, batch(i * RECORDS_PER_BATCH)) == i * RECORDS_PER_BATCH
    return t


def produce(conn: Raw, topic: str, partition: int, records: bytes) -> int:
    resp = conn.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=partition, records=records)])]), 9)
    assert isinstance(resp, ProduceResponse)
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == 0, ErrorCode(p.error_code).name
    return p.base_offset


def delete(conn: Raw, *parts: tuple[str, int, int], version: int = 2) -> list[tuple[str, int, int, int]]:
    """(topic, partition, low watermark, error code) for each (topic, partition, offset) asked."""
    resp = conn.request(DeleteRecordsRequest(topics=[
        DeleteRecordsTopic(name=t, partitions=[DeleteRecordsPartition(partition_index=p, offset=o)])
        for t, p, o in parts], timeout_ms=5000), version)
    assert isinstance(resp, DeleteRecordsResponse)
    return [(t.name, p.partition_index, p.low_watermark, p.error_code) for t in resp.topics for p in t.partitions]


def delete_one(conn: Raw, topic: str, offset: int, partition: int = 0, version: int = 2) -> tuple[int, int]:
    (_, _, low, code), = delete(conn, (topic, partition, offset), version=version)
    return low, code


def fetch(conn: Raw, topic: str, offset: int, partition: int = 0) -> PartitionData:
    resp = conn.request(FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=50_000_000, topics=[FetchTopic(
        topic=topic, partitions=[FetchPartition(partition=partition, fetch_offset=offset,
                                                partition_max_bytes=10_000_000)])]), 11)
    assert isinstance(resp, FetchResponse)
    return resp.responses[0].partitions[0]


def offsets_read(data: PartitionData) -> list[int]:
    return [r.offset for _, recs in decode_batches(bytes(data.records or b"")) for r in recs]


def list_offset(conn: Raw, topic: str, timestamp: int) -> int:
    r = conn.request(ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(name=topic, partitions=[
        ListOffsetsPartition(partition_index=0, timestamp=timestamp)])]), 7)
    assert isinstance(r, ListOffsetsResponse) and r.topics[0].partitions[0].error_code == 0
    return r.topics[0].partitions[0].offset


def earliest(conn: Raw, topic: str) -> int:
    return list_offset(conn, topic, -2)


def size_on_disk(conn: Raw, topic: str) -> int:
    r = conn.request(DescribeLogDirsRequest(topics=[DescribableLogDirTopic(topic=topic, partitions=[0])]), 4)
    assert isinstance(r, DescribeLogDirsResponse)
    (d,) = r.results
    (t,) = d.topics
    return t.partitions[0].partition_size


# ---- the log start moves ---------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_inside_a_segment_then_across_segments(conn: Raw, version: int) -> None:
    t = create_segmented(conn, 10)  # offsets 0-49; segments at 0, 15, 30, 45
    assert size_on_disk(conn, t) == 10 * BATCH_SIZE

    assert delete_one(conn, t, 7, version=version) == (7, 0)
    assert earliest(conn, t) == 7
    assert list_offset(conn, t, -1) == 50  # the end does not move
    below = fetch(conn, t, 6)
    assert below.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and below.log_start_offset == 7
    assert below.records == b""  # empty, never null: librdkafka rejects a whole response with a null record set
    at = fetch(conn, t, 7)
    assert at.error_code == 0 and at.log_start_offset == 7
    # whole batches: the one holding offset 7 starts at 5, and the consumer skips 5 and 6
    assert offsets_read(at)[:3] == [5, 6, 7]
    assert size_on_disk(conn, t) == 10 * BATCH_SIZE  # the first segment still holds offsets 7-14

    assert delete_one(conn, t, 32, version=version) == (32, 0)
    assert earliest(conn, t) == 32
    assert fetch(conn, t, 31).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert offsets_read(fetch(conn, t, 32))[:3] == [30, 31, 32]
    assert size_on_disk(conn, t) == 4 * BATCH_SIZE  # segments 0 and 15 are gone from disk

    # an offset at or below the start changes nothing and answers the current start
    assert delete_one(conn, t, 10, version=version) == (32, 0)
    assert delete_one(conn, t, 32, version=version) == (32, 0)
    assert earliest(conn, t) == 32


def test_minus_one_deletes_up_to_the_high_watermark(conn: Raw) -> None:
    t = create_segmented(conn, 4)  # offsets 0-19
    assert delete_one(conn, t, -1) == (20, 0)
    assert earliest(conn, t) == 20 == list_offset(conn, t, -1)
    empty = fetch(conn, t, 20)
    assert empty.error_code == 0 and offsets_read(empty) == [] and empty.log_start_offset == 20
    assert fetch(conn, t, 19).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # the log goes on from where it was
    assert produce(conn, t, 0, batch(20)) == 20
    assert offsets_read(fetch(conn, t, 20)) == list(range(20, 25))
    assert delete_one(conn, t, -1) == (25, 0)


def test_refusals_get_kafkas_codes(conn: Raw) -> None:
    t = create_segmented(conn, 2)  # offsets 0-9
    assert delete_one(conn, t, 11) == (-1, ErrorCode.OFFSET_OUT_OF_RANGE)  # beyond the high watermark
    assert delete_one(conn, t, -2) == (-1, ErrorCode.OFFSET_OUT_OF_RANGE)  # negative, not -1
    assert delete_one(conn, t, 5, partition=1) == (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    missing = unique_topic("dr-missing")
    assert delete_one(conn, missing, 0) == (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    md = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name=missing)], allow_auto_topic_creation=False), 9)
    assert isinstance(md, MetadataResponse)  # DeleteRecords does not create topics
    assert md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    compacted = unique_topic("dr-compact")
    create(conn, compacted, configs={"cleanup.policy": "compact"})
    produce(conn, compacted, 0, build_batch_from_messages([(b"k", b"v", [], None)]))
    assert delete_one(conn, compacted, 1) == (-1, ErrorCode.POLICY_VIOLATION)
    both = unique_topic("dr-compact-delete")  # a policy that includes delete allows it, as in Kafka
    create(conn, both, configs={"cleanup.policy": "compact,delete"})
    produce(conn, both, 0, build_batch_from_messages([(b"k", b"v", [], None), (b"k", b"w", [], None)]))
    assert delete_one(conn, both, 1) == (1, 0)

    fc = conn.request(FindCoordinatorRequest(key=unique_topic("dr-group"), key_type=0), 1)  # makes __consumer_offsets
    assert isinstance(fc, FindCoordinatorResponse) and fc.error_code == 0
    assert delete_one(conn, "__consumer_offsets", 0) == (-1, ErrorCode.INVALID_TOPIC_EXCEPTION)

    # one request, several answers: each partition on its own, a failure leaves the others alone
    got = delete(conn, (t, 0, 4), (t, 1, 0), (missing, 0, 0))
    assert sorted(got) == sorted([(t, 0, 4, 0), (t, 1, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                  (missing, 0, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])
    assert earliest(conn, t) == 4


def test_a_partition_named_twice_is_answered_once_with_the_last_offset(conn: Raw) -> None:
    t = create_segmented(conn, 2)
    resp = conn.request(DeleteRecordsRequest(topics=[
        DeleteRecordsTopic(name=t, partitions=[DeleteRecordsPartition(partition_index=0, offset=3)]),
        DeleteRecordsTopic(name=t, partitions=[DeleteRecordsPartition(partition_index=0, offset=6)]),
    ], timeout_ms=5000), 2)
    assert isinstance(resp, DeleteRecordsResponse)
    assert [(x.name, [(p.partition_index, p.low_watermark, p.error_code) for p in x.partitions])
            for x in resp.topics] == [(t, [(0, 6, 0)])]


def test_a_parked_fetch_below_the_new_start_is_answered_at_once(conn: Raw) -> None:
    t = create_segmented(conn, 2)
    # One connection, two pipelined requests: the broker starts handling them in order, so the
    # fetch (min_bytes far beyond what the log holds) is parked before the deletion runs, and
    # answers come back in order, the fetch's first.
    conn.send(FetchRequest(max_wait_ms=20_000, min_bytes=50_000_000, max_bytes=50_000_000, topics=[FetchTopic(
        topic=t, partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=10_000_000)])]), 11)
    started = time.monotonic()
    conn.send(DeleteRecordsRequest(topics=[DeleteRecordsTopic(
        name=t, partitions=[DeleteRecordsPartition(partition_index=0, offset=5)])], timeout_ms=5000), 2)
    _, fetched = conn.receive(FetchRequest, 11)
    assert time.monotonic() - started < 10, "the parked fetch was not woken by DeleteRecords"
    _, deleted = conn.receive(DeleteRecordsRequest, 2)
    assert isinstance(deleted, DeleteRecordsResponse) and deleted.topics[0].partitions[0].low_watermark == 5
    assert isinstance(fetched, FetchResponse)
    p = fetched.responses[0].partitions[0]
    assert p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and p.log_start_offset == 5


def test_producer_state_and_metadata_are_unaffected(conn: Raw) -> None:
    t = create_segmented(conn, 3)
    idempotent = build_batch_from_messages([(None, b"x", [], None)], producer_id=4242, producer_epoch=0,
                                           base_sequence=0)
    assert produce(conn, t, 0, idempotent) == 15
    assert delete_one(conn, t, -1) == (16, 0)
    dp = conn.request(DescribeProducersRequest(topics=[TopicRequest(name=t, partition_indexes=[0])]), 0)
    assert isinstance(dp, DescribeProducersResponse)
    (state,) = dp.topics[0].partitions[0].active_producers
    assert (state.producer_id, state.last_sequence) == (4242, 0)
    # the idempotent producer carries on with its next sequence
    nxt = build_batch_from_messages([(None, b"y", [], None)], producer_id=4242, producer_epoch=0, base_sequence=1)
    assert produce(conn, t, 0, nxt) == 16
    md = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name=t)], allow_auto_topic_creation=False), 9)
    assert isinstance(md, MetadataResponse)
    assert md.topics[0].error_code == 0 and [p.partition_index for p in md.topics[0].partitions] == [0]


# ---- durability --------------------------------------------------------------------------------------

def test_the_new_start_survives_sigkill(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory()
    c = Raw(b.port)
    try:
        mid = create_segmented(c, 10)
        across = create_segmented(c, 10)
        assert delete_one(c, mid, 22) == (22, 0)  # inside the segment at 15
        assert delete_one(c, across, 47) == (47, 0)  # past three whole segments
    finally:
        c.close()
    b.restart(kill=True)
    c = Raw(b.port)
    try:
        assert earliest(c, mid) == 22 and earliest(c, across) == 47
        assert fetch(c, mid, 21).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert offsets_read(fetch(c, mid, 22))[:3] == [20, 21, 22]
        assert fetch(c, across, 46).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert offsets_read(fetch(c, across, 47)) == [45, 46, 47, 48, 49]
        assert size_on_disk(c, mid) == 7 * BATCH_SIZE  # the segment at 0 went
        assert size_on_disk(c, across) == BATCH_SIZE
        assert list_offset(c, mid, -1) == 50 == list_offset(c, across, -1)
    finally:
        c.close()
