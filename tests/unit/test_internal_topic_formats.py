"""Issue 10: `__consumer_offsets` and `__transaction_state` records in Kafka's byte layout.

Two independent checks against Kafka's definitions (OffsetCommitKey/Value.json,
GroupMetadataKey/Value.json, TransactionLogKey/Value.json):

* byte vectors assembled here by hand with `struct`, field by field as the JSON lists them, are
  decoded by Ketch — including versions Ketch never writes (offset value 0 and 4, group value 0-4);
* what Ketch writes is decoded by tests/helpers/kafka_json_reader.py, a small reader that
  interprets the JSON field lists and shares no code with protocol/.
"""

from __future__ import annotations

import struct

import pytest
from helpers.kafka_json_reader import read_record as _read
from hypothesis import given
from hypothesis import strategies as st

from broker.group import records as rec
from broker.txn.log_records import TxnLogFormatError
from broker.txn.log_records import decode_key as txn_decode_key
from broker.txn.log_records import decode_value as txn_decode_value
from broker.txn.log_records import encode_key as txn_encode_key
from broker.txn.log_records import encode_value as txn_encode_value
from broker.txn.state import TxnRecord, TxnState


# ---- hand-built byte vectors ---------------------------------------------------------------------
def s16(x: str | None) -> bytes:
    if x is None:
        return struct.pack(">h", -1)
    raw = x.encode()
    return struct.pack(">h", len(raw)) + raw


def b32(x: bytes) -> bytes:
    return struct.pack(">i", len(x)) + x


def cstr(x: str | None) -> bytes:  # compact string: uvarint(len + 1), single byte for these sizes
    return bytes([0]) if x is None else bytes([len(x.encode()) + 1]) + x.encode()


def test_offset_commit_keys_of_both_versions_are_read_and_version_1_is_written() -> None:
    v1 = struct.pack(">h", 1) + s16("grp") + s16("orders") + struct.pack(">i", 7)
    assert rec.decode_key(v1) == rec.OffsetKey("grp", "orders", 7)
    assert rec.decode_key(struct.pack(">h", 0) + v1[2:]) == rec.OffsetKey("grp", "orders", 7)
    assert rec.encode_key(rec.OffsetKey("grp", "orders", 7)) == v1


def test_group_metadata_key_is_version_2() -> None:
    raw = struct.pack(">h", 2) + s16("grp")
    assert rec.decode_key(raw) == rec.GroupKey("grp")
    assert rec.encode_key(rec.GroupKey("grp")) == raw


def test_offset_commit_value_v3_is_written_and_v1_when_an_expiry_is_set() -> None:
    v3 = struct.pack(">hqi", 3, 42, 5) + s16("meta") + struct.pack(">q", 1700)
    assert rec.encode_offset_value(rec.OffsetValue(42, 5, "meta", 1700)) == v3
    assert rec.decode_offset_value(v3) == rec.OffsetValue(42, 5, "meta", 1700, -1)
    v1 = struct.pack(">hq", 1, 42) + s16("") + struct.pack(">qq", 1700, 9000)
    assert rec.encode_offset_value(rec.OffsetValue(42, -1, "", 1700, 9000)) == v1
    assert rec.decode_offset_value(v1) == rec.OffsetValue(42, -1, "", 1700, 9000)


def test_offset_commit_values_kafka_wrote_long_ago_or_will_write_are_read() -> None:
    v0 = struct.pack(">hq", 0, 11) + s16("m") + struct.pack(">q", 5)
    assert rec.decode_offset_value(v0) == rec.OffsetValue(11, -1, "m", 5, -1)
    v2 = struct.pack(">hq", 2, 11) + s16("m") + struct.pack(">q", 5)
    assert rec.decode_offset_value(v2) == rec.OffsetValue(11, -1, "m", 5, -1)
    # v4 is flexible: compact string, then a tagged-field section (one unknown tag, skipped)
    v4 = struct.pack(">hqi", 4, 11, 3) + cstr("m") + struct.pack(">q", 5) + bytes([1, 9, 2, 0xAB, 0xCD])
    assert rec.decode_offset_value(v4) == rec.OffsetValue(11, 3, "m", 5, -1)


def _member_v3(mid: str, instance: str | None) -> bytes:
    return (s16(mid) + s16(instance) + s16("client-1") + s16("/10.0.0.1") + struct.pack(">ii", 300000, 45000)
            + b32(b"\x00\x01sub") + b32(b"\x00\x01asg"))


def test_group_metadata_value_v3_with_a_static_member_is_written_and_read() -> None:
    raw = (struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 4) + s16("range") + s16("m-1")
           + struct.pack(">q", 1234) + struct.pack(">i", 2) + _member_v3("m-1", "pod-0") + _member_v3("m-2", None))
    value = rec.GroupValue("consumer", 4, "range", "m-1", 1234, (
        rec.MemberValue("m-1", "pod-0", "client-1", "/10.0.0.1", 300000, 45000, b"\x00\x01sub", b"\x00\x01asg"),
        rec.MemberValue("m-2", None, "client-1", "/10.0.0.1", 300000, 45000, b"\x00\x01sub", b"\x00\x01asg")))
    assert rec.decode_group_value(raw) == value
    assert rec.encode_group_value(value) == raw


def test_group_metadata_values_of_other_versions_are_read() -> None:
    # v0: no rebalance timeout (Kafka takes the session timeout), no state timestamp, no instance id
    m0 = s16("m") + s16("c") + s16("h") + struct.pack(">i", 10000) + b32(b"s") + b32(b"a")
    v0 = struct.pack(">h", 0) + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("m") \
        + struct.pack(">i", 1) + m0
    assert rec.decode_group_value(v0) == rec.GroupValue(
        "consumer", 1, "range", "m", -1, (rec.MemberValue("m", None, "c", "h", 10000, 10000, b"s", b"a"),))
    # an empty group (v2): null protocol and leader, no members
    v2 = struct.pack(">h", 2) + s16("consumer") + struct.pack(">i", 0) + s16(None) + s16(None) \
        + struct.pack(">qi", 77, 0)
    assert rec.decode_group_value(v2) == rec.GroupValue("consumer", 0, None, None, 77, ())
    # v4: flexible (compact strings/bytes/arrays, tagged sections at member and top level)
    m4 = (cstr("m") + cstr(None) + cstr("c") + cstr("h") + struct.pack(">ii", 20000, 10000)
          + bytes([2]) + b"s" + bytes([2]) + b"a" + bytes([0]))
    v4 = struct.pack(">h", 4) + cstr("consumer") + struct.pack(">i", 2) + cstr("range") + cstr("m") \
        + struct.pack(">q", 5) + bytes([2]) + m4 + bytes([0])
    assert rec.decode_group_value(v4) == rec.GroupValue(
        "consumer", 2, "range", "m", 5, (rec.MemberValue("m", None, "c", "h", 20000, 10000, b"s", b"a"),))


def test_consumer_offsets_tombstone_is_a_null_value_and_unknown_kinds_are_refused() -> None:
    # KIP-848's consumer-group records use key versions 3+: not ours to misread
    with pytest.raises(rec.RecordFormatError):
        rec.decode_key(struct.pack(">h", 3) + s16("grp"))
    with pytest.raises(rec.RecordFormatError):
        rec.decode_key(struct.pack(">h", 1) + s16(None) + s16("t") + struct.pack(">i", 0))
    with pytest.raises(rec.RecordFormatError):
        rec.decode_offset_value(struct.pack(">hq", 5, 1))


def test_transaction_log_records_v0_by_hand() -> None:
    key = struct.pack(">h", 0) + s16("txn-1")
    assert txn_decode_key(key) == "txn-1" and txn_encode_key("txn-1") == key
    value = (struct.pack(">hqhib", 0, 1000, 3, 60000, 1) + struct.pack(">i", 2)
             + s16("a") + struct.pack(">iii", 2, 0, 1) + s16("b") + struct.pack(">ii", 1, 4)
             + struct.pack(">qq", 555, 444))
    r = TxnRecord(1000, 3, -1, -1, -1, 60000, TxnState.ONGOING,
                  frozenset({("a", 0), ("a", 1), ("b", 4)}), 444, 555)
    assert txn_decode_value(value) == r
    assert txn_encode_value(r) == value
    empty = struct.pack(">hqhib", 0, 1000, 3, 60000, 0) + struct.pack(">i", -1) + struct.pack(">qq", 9, -1)
    e = TxnRecord(1000, 3, -1, -1, -1, 60000, TxnState.EMPTY, frozenset(), -1, 9)
    assert txn_decode_value(empty) == e and txn_encode_value(e) == empty


def test_transaction_log_value_v1_carries_the_kip890_fields_as_tags() -> None:
    tags = bytes([2]) + bytes([0, 8]) + struct.pack(">q", 999) + bytes([2, 2]) + struct.pack(">h", 2)
    raw = (struct.pack(">hqhib", 1, 1000, 0, 30000, 4) + bytes([2]) + cstr("t") + bytes([2])
           + struct.pack(">i", 3) + bytes([0]) + struct.pack(">qq", 20, 10) + tags)
    got = txn_decode_value(raw)
    assert (got.producer_id, got.last_producer_id, got.next_producer_id, got.state, got.partitions) == (
        1000, 999, -1, TxnState.COMPLETE_COMMIT, frozenset({("t", 3)}))
    with pytest.raises(TxnLogFormatError):
        txn_decode_value(struct.pack(">h", 2) + raw[2:])


# ---- what Ketch writes, read by the independent reader --------------------------------------------
names = st.text(max_size=30)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
members = st.builds(rec.MemberValue, names, st.none() | names, names, names, i32, i32,
                    st.binary(max_size=40), st.binary(max_size=40))


@given(names, names, st.integers(0, 2**31 - 1), names)
def test_ketch_keys_read_by_the_json_reader(group: str, topic: str, partition: int, g2: str) -> None:
    assert _read("OffsetCommitKey", rec.encode_key(rec.OffsetKey(group, topic, partition))) == (
        1, {"group": group, "topic": topic, "partition": partition})
    assert _read("GroupMetadataKey", rec.encode_key(rec.GroupKey(g2))) == (2, {"group": g2})


@given(i64, i32, names, i64, st.sampled_from([-1]) | i64)
def test_ketch_offset_values_read_by_the_json_reader(off: int, epoch: int, meta: str, ts: int, exp: int) -> None:
    version, got = _read("OffsetCommitValue", rec.encode_offset_value(rec.OffsetValue(off, epoch, meta, ts, exp)))
    if exp == -1:
        assert (version, got) == (3, {"offset": off, "leaderEpoch": epoch, "metadata": meta, "commitTimestamp": ts})
    else:  # only v1 holds an expiry (and has no leader epoch)
        assert (version, got) == (1, {"offset": off, "metadata": meta, "commitTimestamp": ts, "expireTimestamp": exp})


@given(names, i32, st.none() | names, st.none() | names, i64, st.lists(members, max_size=3).map(tuple))
def test_ketch_group_values_read_by_the_json_reader(ptype: str, gen: int, proto: str | None, leader: str | None,
                                                    ts: int, ms: tuple[rec.MemberValue, ...]) -> None:
    v = rec.GroupValue(ptype, gen, proto, leader, ts, ms)
    version, got = _read("GroupMetadataValue", rec.encode_group_value(v))
    assert version == 3
    assert got == {"protocolType": ptype, "generation": gen, "protocol": proto, "leader": leader,
                   "currentStateTimestamp": ts, "members": [{
                       "memberId": m.member_id, "groupInstanceId": m.group_instance_id, "clientId": m.client_id,
                       "clientHost": m.client_host, "rebalanceTimeout": m.rebalance_timeout_ms,
                       "sessionTimeout": m.session_timeout_ms, "subscription": m.subscription,
                       "assignment": m.assignment} for m in ms]}
    assert rec.decode_group_value(rec.encode_group_value(v)) == v


txn_records = st.builds(
    TxnRecord, producer_id=st.integers(0, 2**63 - 1), producer_epoch=st.integers(0, 2**15 - 1),
    last_producer_id=st.sampled_from([-1]) | st.integers(0, 2**63 - 1), last_producer_epoch=st.just(-1),
    next_producer_id=st.sampled_from([-1]) | st.integers(0, 2**63 - 1), timeout_ms=st.integers(1, 2**31 - 1),
    state=st.sampled_from(list(TxnState)),
    partitions=st.frozensets(st.tuples(st.text(min_size=1, max_size=10), st.integers(0, 100)), max_size=5),
    start_ms=st.integers(-1, 2**62), update_ms=st.integers(-1, 2**62),
    next_producer_epoch=st.sampled_from([-1]) | st.integers(0, 2**15 - 1))


@given(txn_records)
def test_ketch_transaction_records_read_by_the_json_reader(r: TxnRecord) -> None:
    version, got = _read("TransactionLogValue", txn_encode_value(r))
    flexible = r.last_producer_id != -1 or r.next_producer_id != -1 or r.next_producer_epoch != -1
    assert version == (1 if flexible else 0)
    assert got["ProducerId"] == r.producer_id and got["ProducerEpoch"] == r.producer_epoch
    assert got["TransactionStatus"] == int(r.state) and got["TransactionTimeoutMs"] == r.timeout_ms
    assert (got["TransactionStartTimestampMs"], got["TransactionLastUpdateTimestampMs"]) == (r.start_ms, r.update_ms)
    if r.state == TxnState.EMPTY:
        assert got["TransactionPartitions"] is None
    else:
        assert {(t["Topic"], p) for t in got["TransactionPartitions"] for p in t["PartitionIds"]} == r.partitions
    assert got.get("PreviousProducerId", -1) == r.last_producer_id
    assert got.get("NextProducerId", -1) == r.next_producer_id
    assert got.get("NextProducerEpoch", -1) == r.next_producer_epoch  # KIP-939's tag 3
    assert _read("TransactionLogKey", txn_encode_key("tid")) == (0, {"TransactionalId": "tid"})
