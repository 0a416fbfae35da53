"""Bad input over a raw socket: each case gets Kafka's error or a closed connection, is logged,
and the broker keeps serving everyone else with no damage to any log."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from helpers import BrokerProcess
from helpers.raw import Raw

from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.primitives import Reader
from protocol.records import build_batch_from_messages


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """These tests share one broker (unique topics each); `conn` (tests/conftest.py) talks to it."""
    return module_broker


def _healthy(broker: BrokerProcess) -> None:
    """Another client is still served after the bad one."""
    c = Raw(broker.port)
    try:
        resp = c.request(ApiVersionsRequest(), 0)
        assert isinstance(resp, ApiVersionsResponse) and resp.error_code == 0
    finally:
        c.close()


def _create(broker: BrokerProcess, name: str, partitions: int = 1) -> None:
    c = Raw(broker.port)
    try:
        resp = c.request(CreateTopicsRequest(topics=[CreatableTopic(name=name, num_partitions=partitions,
                                                                    replication_factor=1)], timeout_ms=5000), 4)
        assert isinstance(resp, CreateTopicsResponse)
        assert resp.topics[0].error_code == 0
    finally:
        c.close()


def _latest(broker: BrokerProcess, topic: str, partition: int = 0) -> int:
    c = Raw(broker.port)
    try:
        resp = c.request(ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(
            name=topic, partitions=[ListOffsetsPartition(partition_index=partition, timestamp=-1)])]), 1)
        assert isinstance(resp, ListOffsetsResponse)
        p = resp.topics[0].partitions[0]
        assert p.error_code == 0
        return p.offset
    finally:
        c.close()


def _produce(conn: Raw, topic: str, records: bytes, *, acks: int = -1, partition: int = 0) -> tuple[int, int]:
    resp = conn.request(ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=partition, records=records)])]), 7)
    assert isinstance(resp, ProduceResponse)
    p = resp.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def _closes(conn: Raw) -> bool:
    return conn.recv_frame() is None


def _log_count(broker: BrokerProcess, needle: str) -> int:
    return Path(broker.log_path).read_text(errors="replace").count(needle)


# ---- frames ------------------------------------------------------------------------------------

def test_absurd_frame_size_closes_connection(broker: BrokerProcess, conn: Raw) -> None:
    before = _log_count(broker, "invalid frame size")
    conn.sock.sendall(struct.pack(">i", 0x7FFFFFF0) + b"\x00" * 16)
    assert _closes(conn)
    assert _log_count(broker, "invalid frame size") == before + 1
    _healthy(broker)


def test_negative_frame_size_closes_connection(broker: BrokerProcess, conn: Raw) -> None:
    conn.sock.sendall(struct.pack(">i", -5) + b"\x00" * 16)
    assert _closes(conn)
    _healthy(broker)


def test_truncated_header_closes_connection(broker: BrokerProcess, conn: Raw) -> None:
    conn.send_frame(struct.pack(">hhi", 3, 1, 7) + b"\x00")  # client id length cut in half
    assert _closes(conn)
    _healthy(broker)


def test_unknown_api_key_closes_connection(broker: BrokerProcess, conn: Raw) -> None:
    before = _log_count(broker, "unknown API key")
    conn.send_frame(struct.pack(">hhih", 999, 0, 1, -1))
    assert _closes(conn)
    assert _log_count(broker, "unknown API key") == before + 1
    _healthy(broker)


def test_unsupported_version_closes_connection(broker: BrokerProcess, conn: Raw) -> None:
    conn.send_frame(struct.pack(">hhih", 3, 99, 1, -1))
    assert _closes(conn)
    _healthy(broker)


def test_unknown_api_versions_version_gets_v0_fallback(conn: Raw) -> None:
    conn.send_frame(struct.pack(">hhih", 18, 99, 42, -1) + b"\x00\x00\x00")
    frame = conn.recv_frame()
    assert frame is not None
    r = Reader(frame)
    assert r.int32() == 42
    resp = ApiVersionsResponse.read(r, 0)
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert keys[18] == (0, 4) and 0 in keys and 1 in keys
    # the connection stays usable: the client retries with a version we speak
    again = conn.request(ApiVersionsRequest(), 3)
    assert isinstance(again, ApiVersionsResponse) and again.error_code == 0


def test_malformed_body_closes_connection(broker: BrokerProcess, conn: Raw) -> None:
    # Metadata v1 claiming a million topics with no bytes behind the count
    conn.send_frame(struct.pack(">hhih", 3, 1, 1, -1) + struct.pack(">i", 1_000_000))
    assert _closes(conn)
    _healthy(broker)


def test_garbage_after_valid_frames_only_hurts_that_connection(broker: BrokerProcess, conn: Raw) -> None:
    resp = conn.request(MetadataRequest(topics=[]), 1)
    assert isinstance(resp, MetadataResponse)
    conn.sock.sendall(b"\xff" * 64)
    assert _closes(conn)
    _healthy(broker)


# ---- record batches ------------------------------------------------------------------------------

def _batch(n: int = 3, **kw: int) -> bytes:
    return build_batch_from_messages([(b"k%d" % i, b"v%d" % i, [], None) for i in range(n)], **kw)


def test_wrong_crc_is_corrupt_message_and_nothing_stored(broker: BrokerProcess, conn: Raw) -> None:
    _create(broker, "bad-crc")
    b = bytearray(_batch())
    b[-1] ^= 0xFF
    code, _ = _produce(conn, "bad-crc", bytes(b))
    assert code == ErrorCode.CORRUPT_MESSAGE
    assert _latest(broker, "bad-crc") == 0
    code, base = _produce(conn, "bad-crc", _batch())
    assert (code, base) == (0, 0)
    assert _latest(broker, "bad-crc") == 3


def test_wrong_magic_is_rejected_and_nothing_stored(broker: BrokerProcess, conn: Raw) -> None:
    _create(broker, "bad-magic")
    b = bytearray(_batch())
    b[16] = 1
    code, _ = _produce(conn, "bad-magic", bytes(b))
    assert code == ErrorCode.INVALID_RECORD
    assert _latest(broker, "bad-magic") == 0


def test_truncated_batch_is_corrupt_message(broker: BrokerProcess, conn: Raw) -> None:
    _create(broker, "bad-trunc")
    code, _ = _produce(conn, "bad-trunc", _batch()[:-5])
    assert code == ErrorCode.CORRUPT_MESSAGE
    assert _latest(broker, "bad-trunc") == 0


def test_second_batch_bad_rejects_whole_partition_write(broker: BrokerProcess, conn: Raw) -> None:
    _create(broker, "bad-second")
    bad = bytearray(_batch())
    bad[70] ^= 0x01
    code, _ = _produce(conn, "bad-second", _batch() + bytes(bad))
    assert code == ErrorCode.CORRUPT_MESSAGE
    assert _latest(broker, "bad-second") == 0


def test_batch_over_max_message_bytes(broker: BrokerProcess, conn: Raw) -> None:
    _create(broker, "too-big")
    big = build_batch_from_messages([(None, b"x" * 1_100_000, [], None)])
    code, _ = _produce(conn, "too-big", big)
    assert code == ErrorCode.MESSAGE_TOO_LARGE
    assert _latest(broker, "too-big") == 0


def test_invalid_acks(broker: BrokerProcess, conn: Raw) -> None:
    _create(broker, "bad-acks")
    code, _ = _produce(conn, "bad-acks", _batch(), acks=2)
    assert code == ErrorCode.INVALID_REQUIRED_ACKS
    assert _latest(broker, "bad-acks") == 0


def test_unknown_partition(broker: BrokerProcess, conn: Raw) -> None:
    _create(broker, "one-part")
    code, _ = _produce(conn, "one-part", _batch(), partition=5)
    assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_invalid_topic_name_rejected(conn: Raw) -> None:
    resp = conn.request(CreateTopicsRequest(topics=[CreatableTopic(name="bad/name", num_partitions=1,
                                                                   replication_factor=1)], timeout_ms=5000), 4)
    assert isinstance(resp, CreateTopicsResponse)
    assert resp.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    md = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name="bad/name")],
                                      allow_auto_topic_creation=True), 4)
    assert isinstance(md, MetadataResponse)
    assert md.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


# ---- idempotent producers -----------------------------------------------------------------------

def _pid(conn: Raw) -> int:
    resp = conn.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 1)
    assert isinstance(resp, InitProducerIdResponse) and resp.error_code == 0
    return resp.producer_id


def test_idempotent_duplicate_gets_original_offset(broker: BrokerProcess, conn: Raw) -> None:
    _create(broker, "idem-dup")
    pid = _pid(conn)
    first = _batch(3, producer_id=pid, producer_epoch=0, base_sequence=0)
    assert _produce(conn, "idem-dup", first) == (0, 0)
    assert _produce(conn, "idem-dup", _batch(2, producer_id=pid, producer_epoch=0, base_sequence=3)) == (0, 3)
    assert _produce(conn, "idem-dup", first) == (0, 0)  # retried batch: original offset, not stored again
    assert _latest(broker, "idem-dup") == 5


def test_idempotent_out_of_order_sequence(broker: BrokerProcess, conn: Raw) -> None:
    _create(broker, "idem-ooo")
    pid = _pid(conn)
    assert _produce(conn, "idem-ooo", _batch(3, producer_id=pid, producer_epoch=0, base_sequence=0)) == (0, 0)
    code, _ = _produce(conn, "idem-ooo", _batch(3, producer_id=pid, producer_epoch=0, base_sequence=7))
    assert code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _latest(broker, "idem-ooo") == 3


def test_idempotent_stale_epoch(broker: BrokerProcess, conn: Raw) -> None:
    _create(broker, "idem-epoch")
    pid = _pid(conn)
    assert _produce(conn, "idem-epoch", _batch(1, producer_id=pid, producer_epoch=1, base_sequence=0)) == (0, 0)
    code, _ = _produce(conn, "idem-epoch", _batch(1, producer_id=pid, producer_epoch=0, base_sequence=1))
    assert code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert _latest(broker, "idem-epoch") == 1
