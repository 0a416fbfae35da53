"""`__share_group_state` records and the share coordinator's APIs (83-86) in Kafka 4.1's byte layout.

Each vector is assembled here by hand, field by field in the order of Kafka's JSON definitions
(share-coordinator/src/main/resources/common/message/ShareSnapshotKey/Value.json and
clients/src/main/resources/common/message/{Initialize,Read,Write,Delete}ShareGroupState{Request,Response}.json),
and compared with what Ketch writes and reads:

* ShareSnapshotKey: record type 0 as the int16 version, not flexible: group (int16 string), topic id, partition;
* ShareSnapshotValue v0, flexible: SnapshotEpoch, StateEpoch, LeaderEpoch (int32), StartOffset,
  CreateTimestamp, WriteTimestamp (int64), StateBatches (compact array of FirstOffset, LastOffset,
  DeliveryState int8, DeliveryCount int16). Kafka 4.2 adds DeliveryCompleteCount as tag 0: a record
  carrying it must still be read;
* the four APIs, version 0, all flexible.
"""

from __future__ import annotations

import struct
import uuid

from broker.share.coordinator import decode, encode_key, encode_value
from broker.share.manager import StoredState
from broker.share.partition_state import StateRun
from protocol.messages import share_group_state as sgs

TOPIC = uuid.UUID("0123456789abcdef0123456789abcdef")
NO_TAGS = b"\x00"


def s16(x: str) -> bytes:
    return struct.pack(">h", len(x.encode())) + x.encode()


def cstr(x: str | None) -> bytes:
    return b"\x00" if x is None else bytes([len(x.encode()) + 1]) + x.encode()


def carr(items: list[bytes]) -> bytes:
    return bytes([len(items) + 1]) + b"".join(items)


def batch(first: int, last: int, state: int, count: int) -> bytes:
    return struct.pack(">qqbh", first, last, state, count) + NO_TAGS


def test_share_snapshot_key_is_record_type_0_and_not_flexible() -> None:
    raw = struct.pack(">h", 0) + s16("grp") + TOPIC.bytes + struct.pack(">i", 3)
    assert encode_key(("grp", TOPIC, 3)) == raw
    assert decode(raw, None) == (("grp", TOPIC, 3), None)


def _snapshot_value(tags: bytes = NO_TAGS) -> bytes:
    return (struct.pack(">hiiiq", 0, 0, 2, 7, 100) + struct.pack(">qq", 1234, 1234)
            + carr([batch(100, 104, 2, 1), batch(105, 105, 0, 3), batch(106, 110, 4, 5)]) + tags)


def test_share_snapshot_value_v0_written_and_read_field_by_field() -> None:
    state = StoredState(2, 100, (StateRun(100, 104, 2, 1), StateRun(105, 105, 0, 3), StateRun(106, 110, 4, 5)))
    raw = _snapshot_value()
    assert encode_value(state, 7, 1234) == raw
    key = encode_key(("grp", TOPIC, 0))
    assert decode(key, raw) == (("grp", TOPIC, 0), (state, 7))


def test_share_snapshot_value_with_kafka_42s_delivery_complete_count_tag_is_read() -> None:
    tagged = bytes([1, 0, 4]) + struct.pack(">i", 9)  # one tagged field: tag 0, 4 bytes, int32 9
    _, got = decode(encode_key(("grp", TOPIC, 0)), _snapshot_value(tagged))
    assert got is not None and got[0].start_offset == 100 and got[1] == 7


def test_initialize_share_group_state_v0() -> None:
    req = (cstr("grp") + carr([TOPIC.bytes + carr([struct.pack(">iiq", 1, 0, 42) + NO_TAGS]) + NO_TAGS]) + NO_TAGS)
    msg = sgs.InitializeShareGroupStateRequest(group_id="grp", topics=[sgs.InitializeTopic(
        topic_id=TOPIC, partitions=[sgs.InitializePartition(partition=1, state_epoch=0, start_offset=42)])])
    assert msg.encode(0) == req and sgs.InitializeShareGroupStateRequest.decode(req, 0) == msg
    resp = carr([TOPIC.bytes + carr([struct.pack(">ih", 1, 0) + cstr(None) + NO_TAGS]) + NO_TAGS]) + NO_TAGS
    out = sgs.InitializeShareGroupStateResponse(results=[sgs.TopicResult(
        topic_id=TOPIC, partitions=[sgs.PartitionResult(partition=1, error_code=0, error_message=None)])])
    assert out.encode(0) == resp and sgs.InitializeShareGroupStateResponse.decode(resp, 0) == out


def test_read_share_group_state_v0() -> None:
    req = cstr("grp") + carr([TOPIC.bytes + carr([struct.pack(">ii", 2, 5) + NO_TAGS]) + NO_TAGS]) + NO_TAGS
    msg = sgs.ReadShareGroupStateRequest(group_id="grp", topics=[sgs.ReadTopic(
        topic_id=TOPIC, partitions=[sgs.ReadPartition(partition=2, leader_epoch=5)])])
    assert msg.encode(0) == req and sgs.ReadShareGroupStateRequest.decode(req, 0) == msg
    part = (struct.pack(">ih", 2, 0) + cstr(None) + struct.pack(">iq", 1, 100)
            + carr([batch(100, 101, 2, 1)]) + NO_TAGS)
    resp = carr([TOPIC.bytes + carr([part]) + NO_TAGS]) + NO_TAGS
    out = sgs.ReadShareGroupStateResponse(results=[sgs.ReadTopicResult(topic_id=TOPIC, partitions=[
        sgs.ReadPartitionResult(partition=2, error_code=0, error_message=None, state_epoch=1, start_offset=100,
                                state_batches=[sgs.StateBatch(first_offset=100, last_offset=101, delivery_state=2,
                                                              delivery_count=1)])])])
    assert out.encode(0) == resp and sgs.ReadShareGroupStateResponse.decode(resp, 0) == out
    err = carr([TOPIC.bytes + carr([struct.pack(">ih", 2, 14) + cstr("loading") + struct.pack(">iq", 0, -1)
                                    + carr([]) + NO_TAGS]) + NO_TAGS]) + NO_TAGS
    got = sgs.ReadShareGroupStateResponse.decode(err, 0).results[0].partitions[0]
    assert (got.error_code, got.error_message, got.start_offset) == (14, "loading", -1)


def test_write_share_group_state_v0() -> None:
    part = struct.pack(">iiiq", 0, 1, 6, 100) + carr([batch(100, 103, 4, 5)]) + NO_TAGS
    req = cstr("grp") + carr([TOPIC.bytes + carr([part]) + NO_TAGS]) + NO_TAGS
    msg = sgs.WriteShareGroupStateRequest(group_id="grp", topics=[sgs.WriteTopic(topic_id=TOPIC, partitions=[
        sgs.WritePartition(partition=0, state_epoch=1, leader_epoch=6, start_offset=100, state_batches=[
            sgs.StateBatch(first_offset=100, last_offset=103, delivery_state=4, delivery_count=5)])])])
    assert msg.encode(0) == req and sgs.WriteShareGroupStateRequest.decode(req, 0) == msg
    resp = carr([TOPIC.bytes + carr([struct.pack(">ih", 0, 0) + cstr(None) + NO_TAGS]) + NO_TAGS]) + NO_TAGS
    out = sgs.WriteShareGroupStateResponse(results=[sgs.TopicResult(
        topic_id=TOPIC, partitions=[sgs.PartitionResult(partition=0, error_code=0)])])
    assert out.encode(0) == resp and sgs.WriteShareGroupStateResponse.decode(resp, 0) == out


def test_delete_share_group_state_v0() -> None:
    req = cstr("grp") + carr([TOPIC.bytes + carr([struct.pack(">i", 4) + NO_TAGS]) + NO_TAGS]) + NO_TAGS
    msg = sgs.DeleteShareGroupStateRequest(group_id="grp", topics=[sgs.DeleteTopic(
        topic_id=TOPIC, partitions=[sgs.DeletePartition(partition=4)])])
    assert msg.encode(0) == req and sgs.DeleteShareGroupStateRequest.decode(req, 0) == msg
    resp = carr([TOPIC.bytes + carr([struct.pack(">ih", 4, 0) + cstr(None) + NO_TAGS]) + NO_TAGS]) + NO_TAGS
    out = sgs.DeleteShareGroupStateResponse(results=[sgs.TopicResult(
        topic_id=TOPIC, partitions=[sgs.PartitionResult(partition=4, error_code=0)])])
    assert out.encode(0) == resp and sgs.DeleteShareGroupStateResponse.decode(resp, 0) == out
