"""The `__consumer_offsets` key/value layouts: round trips, the byte layout itself, and bad input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.group import records as rec

names = st.text(max_size=40)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@given(names, names, st.integers(0, 2**31 - 1))
def test_offset_key_round_trip(group: str, topic: str, partition: int) -> None:
    k = rec.OffsetKey(group, topic, partition)
    assert rec.decode_key(rec.encode_key(k)) == k


@given(names)
def test_group_key_round_trip(group: str) -> None:
    k = rec.GroupKey(group)
    assert rec.decode_key(rec.encode_key(k)) == k


@given(i64, i32, names, i64, i64)
def test_offset_value_round_trip(offset: int, epoch: int, meta: str, ts: int, exp: int) -> None:
    v = rec.OffsetValue(offset, epoch, meta, ts, exp)
    assert rec.decode_offset_value(rec.encode_offset_value(v)) == v


members = st.builds(rec.MemberValue, names, st.none() | names, names, names, i32, i32, st.binary(max_size=50),
                    st.binary(max_size=50))


@given(names, i32, st.none() | names, st.none() | names, i64, st.lists(members, max_size=4).map(tuple))
def test_group_value_round_trip(ptype: str, gen: int, proto: str | None, leader: str | None, ts: int,
                                ms: tuple[rec.MemberValue, ...]) -> None:
    v = rec.GroupValue(ptype, gen, proto, leader, ts, ms)
    assert rec.decode_group_value(rec.encode_group_value(v)) == v


def test_offset_key_bytes_are_the_documented_layout() -> None:
    # docs/groups.md: int16 version 1 | int16 len + group | int16 len + topic | int32 partition
    assert rec.encode_key(rec.OffsetKey("g", "tp", 7)) == bytes.fromhex("0001" "0001" "67" "0002" "7470" "00000007")
    assert rec.encode_key(rec.GroupKey("gr")) == bytes.fromhex("0002" "0002" "6772")


def test_offset_value_bytes_are_the_documented_layout() -> None:
    raw = rec.encode_offset_value(rec.OffsetValue(5, 2, "m", 10, -1))
    assert raw == bytes.fromhex("0000" "0000000000000005" "00000002" "0001" "6d" "000000000000000a"
                                "ffffffffffffffff")


def test_keys_of_different_kinds_never_collide() -> None:
    # a compacted topic keeps one value per key: an offset key must never equal a group key
    assert rec.encode_key(rec.GroupKey("a")) != rec.encode_key(rec.OffsetKey("a", "", 0))


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\x00\x07abc", b"\x00\x01\x00\x05ab"])
def test_unreadable_keys_raise_record_format_error(raw: bytes) -> None:
    with pytest.raises(rec.RecordFormatError):
        rec.decode_key(raw)


def test_unknown_value_version_is_refused() -> None:
    raw = bytearray(rec.encode_offset_value(rec.OffsetValue(1)))
    raw[1] = 9
    with pytest.raises(rec.RecordFormatError):
        rec.decode_offset_value(bytes(raw))
    with pytest.raises(rec.RecordFormatError):
        rec.decode_group_value(b"\x00\x05")
