"""client/arrow.py: record batches to Arrow columns and back must say exactly what the per-record
path says (FetchedBatches.records(), decode_batch, partition_for_key), for every shape a log holds."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client import arrow
from client.isolation import FetchedBatches, select_batches
from client.partitioner import partition_for_key
from client.structs import TopicPartition
from protocol import compression
from protocol.errors import ErrorCode, KafkaError
from protocol.records import Record, build_batch, build_batch_from_section, build_control_batch, decode_batch

TP = TopicPartition("t", 3)


def batch(base: int, recs: list[tuple[bytes | None, bytes | None]], *, pid: int = -1, txn: bool = False,
          codec: int = 0, ts: int = 1_000, log_append: bool = False, headers: bool = False) -> bytes:
    return build_batch(
        [Record(i, i * 7, k, v, ((("h", b"x"),) if headers and i % 2 else ())) for i, (k, v) in enumerate(recs)],
        base_offset=base, base_timestamp=ts, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1, transactional=txn, compression=codec,
        timestamp_type=1 if log_append else 0)


def columns(b: pa.RecordBatch) -> list[tuple[object, ...]]:
    d = b.to_pydict()
    return list(zip(d["offset"], d["timestamp"], d["timestamp_type"], d["key"], d["value"],
                    [tuple((h["key"], h["value"]) for h in hs) for hs in d["headers"]], strict=True))


def expected(f: FetchedBatches) -> list[tuple[object, ...]]:
    return [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers) for r in f.records()]


def fetched(log: bytes, fetch_offset: int = 0, aborted: list[tuple[int, int]] | None = None,
            read_committed: bool = True) -> FetchedBatches:
    f, _ = select_batches(TP, log, fetch_offset, aborted, read_committed=read_committed)
    assert f is not None
    return f


# A log with a bit of everything: plain and compressed batches, null keys and values, a value long
# enough for a 3-byte varint, an aborted transaction and its marker, a log-append-time batch.
LOG = b"".join([
    batch(0, [(b"k0", b"v0"), (None, b"v1"), (b"k2", None), (None, None)]),
    batch(4, [(b"a", b"ABORTED"), (b"b", b"ABORTED")], pid=7, txn=True),
    batch(6, [(b"k%d" % i, b"gz-%d" % i) for i in range(50)], codec=compression.BY_NAME["gzip"]),
    build_control_batch(7, 0, False, 0, 2_000, base_offset=56),
    batch(57, [(b"big", b"x" * 20_000), (b"", b"")], pid=8, txn=True),
    build_control_batch(8, 0, True, 0, 2_000, base_offset=59),
    batch(60, [(b"la%d" % i, b"v") for i in range(3)], ts=5_000, log_append=True),
    batch(63, [(b"z%d" % i, b"zs-%d" % i) for i in range(300)], codec=compression.BY_NAME["zstd"]),
])


def test_columns_equal_the_records_of_a_mixed_log_at_read_committed() -> None:
    f = fetched(LOG, aborted=[(7, 4)])
    got = columns(arrow.to_arrow(f))
    assert got == expected(f)
    assert [o for o, *_ in got][:6] == [0, 1, 2, 3, 6, 7], "aborted records are not columns"
    assert got[3][3:5] == (None, None) and got[1][3] is None and got[2][4] is None
    assert arrow.to_arrow(f).schema == arrow.RECORD_SCHEMA


def test_columns_at_read_uncommitted_and_from_a_fetch_offset_inside_a_batch() -> None:
    every = fetched(LOG, read_committed=False)
    assert columns(arrow.to_arrow(every)) == expected(every)
    for offset in (2, 30, 58, 61):
        f = fetched(LOG, fetch_offset=offset, aborted=[(7, 4)])
        got = columns(arrow.to_arrow(f))
        assert got == expected(f) and got[0][0] >= offset


def test_headers_are_columns_too() -> None:
    f = fetched(batch(0, [(b"k%d" % i, b"v") for i in range(5)], headers=True))
    got = columns(arrow.to_arrow(f))
    assert got == expected(f) and got[1][5] == (("h", b"x"),)


def test_a_batch_that_does_not_add_up_is_corrupt_not_misread() -> None:
    good = batch(0, [(b"k", b"value-%d" % i) for i in range(20)])
    bad = bytearray(good)
    bad[-30] ^= 0x5A  # inside some record's fields
    with pytest.raises(KafkaError) as crc:
        arrow.to_arrow(fetched(bytes(bad)))
    assert crc.value.code == ErrorCode.CORRUPT_MESSAGE
    # without the CRC check the decoder itself must notice (here: a length prefix of 127 bytes)
    shifted = bytearray(good)
    shifted[61] = 0xFE
    f = FetchedBatches(TP, bytes(shifted), fetched(good).batches, 0, 20, check_crc=False)
    with pytest.raises(KafkaError) as malformed:
        arrow.to_arrow(f)
    assert malformed.value.code == ErrorCode.CORRUPT_MESSAGE


def decode_runs(runs: list) -> list[tuple[bytes | None, bytes | None]]:
    out = []
    for r in runs:
        h, recs = decode_batch(build_batch_from_section(r.section, r.record_count, base_timestamp=r.base_timestamp,
                                                        max_timestamp=r.max_timestamp))
        assert h.records_count == r.record_count == len(recs)
        assert [x.offset for x in recs] == list(range(r.record_count))
        assert all(x.timestamp == 42 and x.headers == () for x in recs)
        out += [(x.key, x.value) for x in recs]
    return out


maybe_bytes = st.one_of(st.none(), st.binary(max_size=300))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(maybe_bytes, maybe_bytes), min_size=1, max_size=200),
       st.sampled_from([200, 1_000, 262_144]))
def test_encoded_runs_decode_to_the_same_records_in_order_and_fit(pairs: list, max_bytes: int) -> None:
    keys = pa.array([k for k, _ in pairs], pa.binary())
    values = pa.array([v for _, v in pairs], pa.binary())
    runs = arrow.encode(keys, values, max_bytes=max_bytes, timestamp_ms=42)
    assert decode_runs(runs) == pairs
    for r in runs:
        assert r.record_count == 1 or len(r.section) + arrow.BATCH_OVERHEAD <= max_bytes


def test_encode_takes_strings_long_values_and_more_records_than_one_run_holds() -> None:
    n = 40_000  # beyond the offset-delta table: several runs even though the bytes would fit
    runs = arrow.encode(None, pa.array(["v"] * n), max_bytes=10_000_000, timestamp_ms=42)
    assert len(runs) > 1 and decode_runs(runs) == [(None, b"v")] * n
    big = arrow.encode(pa.array(["k"]), pa.array([b"x" * 100_000]), max_bytes=1_000, timestamp_ms=42)
    assert decode_runs(big) == [(b"k", b"x" * 100_000)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=80)), min_size=1, max_size=100),
       st.integers(min_value=1, max_value=1000))
def test_partitions_for_keys_are_what_send_would_choose(keys: list, partitions: int) -> None:
    got = arrow.partitions_for_keys(pa.array(keys, pa.binary()), partitions).to_pylist()
    assert got == [None if k is None else partition_for_key(k, partitions) for k in keys]
