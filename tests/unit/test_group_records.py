"""The `__consumer_offsets` key/value mapping: round trips and bad input (byte layouts: test_internal_topic_formats)."""

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


@given(i64, i32, names, i64, st.sampled_from([-1]) | i64)
def test_offset_value_round_trip(offset: int, epoch: int, meta: str, ts: int, exp: int) -> None:
    v = rec.OffsetValue(offset, epoch, meta, ts, exp)
    got = rec.decode_offset_value(rec.encode_offset_value(v))
    # as in Kafka, a commit with an expire timestamp is written as v1, which has no leader epoch
    assert got == (v if exp == -1 else rec.OffsetValue(offset, -1, meta, ts, exp))


members = st.builds(rec.MemberValue, names, st.none() | names, names, names, i32, i32, st.binary(max_size=50),
                    st.binary(max_size=50))


@given(names, i32, st.none() | names, st.none() | names, i64, st.lists(members, max_size=4).map(tuple))
def test_group_value_round_trip(ptype: str, gen: int, proto: str | None, leader: str | None, ts: int,
                                ms: tuple[rec.MemberValue, ...]) -> None:
    v = rec.GroupValue(ptype, gen, proto, leader, ts, ms)
    assert rec.decode_group_value(rec.encode_group_value(v)) == v


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
