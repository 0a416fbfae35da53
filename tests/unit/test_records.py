"""Record batch v2 codec (protocol.records) and compression codecs (protocol.compression).

Our encoder is checked against independent implementations: kafka-python's pure-Python
DefaultRecordBatchBuilder/DefaultRecordBatch (byte-for-byte for uncompressed batches; it can only
do gzip with what is installed) and aiokafka's Cython reader/builder (for snappy, lz4 and zstd).
Java and librdkafka framing rules that the third-party Python clients do not enforce (LZ4 block
independence, the xerial header) are checked directly on our bytes.
"""

from __future__ import annotations

import gzip
import struct
import types
from collections.abc import Sequence
from typing import Any

import cramjam
import pytest
from aiokafka.record.control_record import ControlRecord as AioControlRecord
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from protocol import compression
from protocol.batch import (
    CONTROL_FLAG,
    CRC_OFFSET,
    HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    compute_crc,
    iter_batches,
    read_header,
    set_max_timestamp_log_append,
    validate,
)
from protocol.control import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_LEADER_CHANGE,
    parse_control_record,
    read_transaction_marker,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.records import (
    DecodedRecord,
    Record,
    _assemble,
    _encode_record,
    build_batch,
    build_batch_from_messages,
    build_control_batch,
    decode_batch,
    decode_batches,
    iter_records,
)

CODECS = [0, 1, 2, 3, 4]
TS = 1_700_000_000_000

Msg = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]


# --- helpers ----------------------------------------------------------------------------------------

def fix_crc(buf: bytearray, pos: int = 0) -> None:
    """Recompute a batch's CRC after a test has edited it, to get past the CRC check on purpose."""
    size = struct.unpack_from(">i", buf, pos + 8)[0] + 12
    struct.pack_into(">I", buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))


def check_valid(batch: bytes | bytearray, pos: int = 0) -> None:
    h = read_header(batch, pos)
    validate(batch, pos, h.size, h)


def kp_build(msgs: Sequence[Msg], *, codec: int = 0, pid: int = -1, epoch: int = -1, seq: int = -1,
             txn: bool = False, offsets: Sequence[int] | None = None, builder: Any = KpBuilder) -> bytes:
    b = builder(2, codec, txn, pid, epoch, seq, 1 << 30)
    for i, (k, v, hs, ts) in enumerate(msgs):
        assert b.append(offsets[i] if offsets else i, ts, k, v, hs) is not None
    return bytes(b.build())


def their_records(batch: bytes, reader: Any = KpBatch) -> list[tuple[Any, ...]]:
    rb = reader(batch)
    assert rb.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in rb]


def our_records(batch: bytes | bytearray | memoryview) -> list[tuple[Any, ...]]:
    _, recs = decode_batch(batch)
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in recs]


def expected(msgs: Sequence[Msg], base_offset: int = 0) -> list[tuple[Any, ...]]:
    return [(base_offset + i, ts, k, v, list(hs)) for i, (k, v, hs, ts) in enumerate(msgs)]


def codec_of(batch: bytes) -> int:
    return read_header(batch).compression


def assert_code(code: ErrorCode, fn: Any, *args: Any, **kw: Any) -> None:
    with pytest.raises(KafkaError) as ei:
        fn(*args, **kw)
    assert ei.value.code == code, ei.value


SAMPLE: list[Msg] = [
    (b"k1", b"v1", [], TS),
    (None, b"value without key", [("h1", b"x"), ("h2", None)], TS + 5),
    (b"key without value", None, [], TS - 3),  # timestamps need not be ordered
    (None, None, [("", b""), ("\u00e9t\u00e9", b"\x00\xff")], TS + 1),
    (b"", b"", [], TS + 2),
]


# --- round trips ------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(codec: int) -> None:
    batch = build_batch_from_messages(SAMPLE, base_offset=42, producer_id=7, producer_epoch=3,
                                      base_sequence=100, compression=codec)
    check_valid(batch)
    h, recs = decode_batch(batch)
    assert h.compression == codec
    assert (h.base_offset, h.last_offset_delta, h.records_count) == (42, 4, 5)
    assert (h.base_timestamp, h.max_timestamp) == (TS, TS + 5)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (7, 3, 100, 104)
    assert h.partition_leader_epoch == -1 and not h.is_transactional and not h.is_control
    assert [tuple(r) for r in recs] == [(o, t, k, v, tuple(hs)) for o, t, k, v, hs in expected(SAMPLE, 42)]
    assert all(isinstance(r, DecodedRecord) for r in recs)


@pytest.mark.parametrize("codec", CODECS)
def test_large_batches(codec: int) -> None:
    many: list[Msg] = [(b"k%d" % i, b"v%d" % i * 3, [("i", b"%d" % i)] if i % 7 == 0 else [], TS + i)
                       for i in range(20_000)]
    batch = build_batch_from_messages(many, compression=codec)
    check_valid(batch)
    assert our_records(batch) == expected(many)
    # values past 8 KiB and 64 KiB: three-byte varint lengths, several xerial chunks / lz4 blocks
    big: list[Msg] = [(b"a" * 10_000, bytes(range(256)) * 400, [("h", b"b" * 70_000)], TS),
                      (None, b"z" * 200_000, [], TS + 100_000)]
    batch = build_batch_from_messages(big, compression=codec)
    check_valid(batch)
    assert our_records(batch) == expected(big)
    assert their_records(batch, AioBatch) == expected(big)


@pytest.mark.parametrize("codec", CODECS)
def test_empty_batch(codec: int) -> None:
    batch = build_batch([], base_offset=5, base_timestamp=TS, compression=codec)
    check_valid(batch)
    h, recs = decode_batch(batch)
    assert recs == [] and h.records_count == 0 and h.last_offset_delta == 0
    assert (h.base_timestamp, h.max_timestamp, h.compression) == (TS, TS, codec)


def test_empty_batch_matches_kafka_python() -> None:
    assert build_batch([], base_timestamp=0, partition_leader_epoch=0) == kp_build([])


def test_build_batch_from_records_with_offset_gaps() -> None:
    records = [Record(0, 0, b"a", b"1"), Record(3, -20, None, b"2", (("h", None),)),
               Record(9000, 70_000, b"c", None)]
    batch = build_batch(records, base_offset=1000, base_timestamp=TS)
    check_valid(batch)
    h, recs = decode_batch(batch)
    assert (h.last_offset_delta, h.records_count, h.max_timestamp) == (9000, 3, TS + 70_000)
    assert [r.offset for r in recs] == [1000, 1003, 10000]
    assert [r.timestamp for r in recs] == [TS, TS - 20, TS + 70_000]
    assert recs[1].headers == (("h", None),)


def test_build_batch_rejects_unordered_offsets() -> None:
    with pytest.raises(ValueError):
        build_batch([Record(1, 0, None, None), Record(1, 0, None, None)], base_timestamp=0)


def test_attribute_flags() -> None:
    batch = build_batch([Record(0, 0, None, b"x")], base_timestamp=TS, producer_id=1, producer_epoch=0,
                        base_sequence=0, transactional=True, timestamp_type=1, partition_leader_epoch=9)
    h = read_header(batch)
    assert h.attributes == TRANSACTIONAL_FLAG | TIMESTAMP_TYPE_MASK
    assert h.partition_leader_epoch == 9
    assert KpBatch(batch).timestamp_type == 1


def test_log_append_time_replaces_record_timestamps() -> None:
    batch = bytearray(build_batch_from_messages(SAMPLE))
    set_max_timestamp_log_append(batch, 0, len(batch), 123)
    check_valid(batch)
    assert {r.timestamp for r in decode_batch(batch)[1]} == {123}
    assert {r[1] for r in their_records(bytes(batch))} == {123}


def test_decode_at_position_and_from_any_buffer() -> None:
    a = build_batch_from_messages(SAMPLE[:2], base_offset=0)
    b = build_batch_from_messages(SAMPLE[2:], base_offset=2)
    both = a + b
    for buf in (both, bytearray(both), memoryview(both)):
        h, recs = decode_batch(buf, len(a))
        assert h.base_offset == 2 and [r.offset for r in recs] == [2, 3, 4]
    assert [r.offset for r in iter_records(both)] == [0, 1, 2, 3, 4]


def test_iter_records_skips_control_batches_and_partial_tail() -> None:
    data = build_batch_from_messages(SAMPLE[:2], producer_id=5, producer_epoch=0, base_sequence=0,
                                     transactional=True)
    marker = build_control_batch(5, 0, True, 3, TS, base_offset=2)
    more = build_batch_from_messages(SAMPLE[2:3], base_offset=3)
    buf = data + marker + more + more[:30]
    assert [r.offset for r in iter_records(buf)] == [0, 1, 3]
    assert [r.offset for r in iter_records(buf, include_control=True)] == [0, 1, 2, 3]
    assert [h.is_control for h, _ in decode_batches(buf)] == [False, True, False]
    assert_code(ErrorCode.CORRUPT_MESSAGE, lambda: list(decode_batches(buf, strict=True)))


# --- compression codecs -------------------------------------------------------------------------------

PAYLOADS = [b"", b"x", b"hello kafka " * 10_000, bytes(range(256)) * 300]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("payload", PAYLOADS, ids=["empty", "one", "text", "binary"])
def test_codec_round_trip(codec: int, payload: bytes) -> None:
    out = compression.compress(codec, payload)
    for form in (out, bytearray(out), memoryview(out)):
        assert compression.decompress(codec, form) == payload
    assert compression.compress(codec, memoryview(payload)) is not None


def test_unknown_codec() -> None:
    for codec in (5, 6, 7, -1):
        assert_code(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, compression.compress, codec, b"x")
        assert_code(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, compression.decompress, codec, b"x")
    assert_code(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, build_batch_from_messages, SAMPLE, compression=5)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_is_corrupt_message(codec: int) -> None:
    for junk in (b"", b"not compressed at all, not even close" * 3):
        assert_code(ErrorCode.CORRUPT_MESSAGE, compression.decompress, codec, junk)


def test_snappy_writes_xerial_framing_with_chunks() -> None:
    data = bytes(range(256)) * 300  # 76,800 bytes: three 32 KiB chunks
    out = compression.compress(2, data)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, chunks = 16, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        chunks.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    assert [len(c) for c in chunks] == [32768, 32768, 11264] and b"".join(chunks) == data
    # empty input still has one chunk: librdkafka only recognises the framing past 20 bytes
    assert len(compression.compress(2, b"")) > 20


def test_snappy_reads_raw_and_xerial_variants() -> None:
    data = b"librdkafka writes raw snappy " * 100
    assert compression.decompress(2, bytes(cramjam.snappy.compress_raw(data))) == data
    framed = compression.compress(2, data)
    little_endian_header = framed[:8] + struct.pack("<ii", 1, 1) + framed[16:]
    assert compression.decompress(2, little_endian_header) == data
    assert compression.decompress(2, framed + framed) == data + data  # concatenated streams
    assert_code(ErrorCode.CORRUPT_MESSAGE, compression.decompress, 2, framed[:-3])
    assert_code(ErrorCode.CORRUPT_MESSAGE, compression.decompress, 2, framed[:18])


def test_snappy_interoperates_with_kafka_python_xerial_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python has its own xerial framing code but no snappy library here; lend it cramjam's
    raw block codec so that its framing, not ours, is exercised."""
    import kafka.codec as kc

    shim = types.SimpleNamespace(compress=lambda b: bytes(cramjam.snappy.compress_raw(b)),
                                 decompress=lambda b: bytes(cramjam.snappy.decompress_raw(b)))
    monkeypatch.setattr(kc, "snappy", shim)
    for data in PAYLOADS[1:]:
        assert kc.snappy_decode(compression.compress(2, data)) == data
        assert compression.decompress(2, kc.snappy_encode(data)) == data
        assert compression.decompress(2, kc.snappy_encode(data, xerial_compatible=False)) == data


def test_lz4_frame_has_independent_blocks() -> None:
    out = compression.compress(3, b"abc" * 100_000)
    assert out[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flg, bd = out[4], out[5]
    # what Java's Lz4BlockInputStream insists on (FLG/BD validate)
    assert flg >> 6 == 1, "frame version"
    assert flg & 0x20, "Java's reader rejects linked blocks"
    assert flg & 0x03 == 0, "reserved bits (Java counts the dict-id bit as reserved)"
    assert 4 <= (bd >> 4) & 7 <= 7 and bd & 0x8F == 0, "block size 64 KiB..4 MiB, reserved bits clear"
    # like Java's writer: no content size, no content checksum
    assert flg & 0x08 == 0 and flg & 0x04 == 0
    # frames from other writers (linked blocks, content checksum) are read too
    linked = bytes(cramjam.lz4.compress(b"xyz" * 50_000))
    assert compression.decompress(3, linked) == b"xyz" * 50_000


def test_zstd_streamed_and_multi_frame() -> None:
    c = cramjam.zstd.Compressor()
    c.compress(b"streamed " * 1000)
    streamed = bytes(c.finish())  # no content size in the frame header, as Java's stream writes
    assert compression.decompress(4, streamed) == b"streamed " * 1000
    one = compression.compress(4, b"a" * 100)
    assert compression.decompress(4, one + one) == b"a" * 200


def test_gzip_multi_member_and_stdlib() -> None:
    data = b"gzip member " * 500
    assert gzip.decompress(compression.compress(1, data)) == data
    assert compression.decompress(1, gzip.compress(data) + gzip.compress(data)) == data + data


# --- control batches ---------------------------------------------------------------------------------

@pytest.mark.parametrize("commit", [True, False])
def test_control_batch(commit: bool) -> None:
    batch = build_control_batch(1234, 5, commit, 17, TS, base_offset=99, partition_leader_epoch=3)
    check_valid(batch)
    h, recs = decode_batch(batch)
    assert h.is_control and h.is_transactional and h.compression == 0
    assert (h.base_offset, h.partition_leader_epoch, h.producer_id, h.producer_epoch) == (99, 3, 1234, 5)
    assert (h.base_sequence, h.records_count, h.last_offset_delta) == (-1, 1, 0)
    assert (h.base_timestamp, h.max_timestamp) == (TS, TS)
    assert h.attributes == TRANSACTIONAL_FLAG | CONTROL_FLAG
    (r,) = recs
    assert (r.offset, r.timestamp, r.headers) == (99, TS, ())
    marker = parse_control_record(r.key, r.value)
    assert marker.type == (CONTROL_COMMIT if commit else CONTROL_ABORT)
    assert (marker.is_commit, marker.is_abort, marker.coordinator_epoch, marker.version) == (commit, not commit, 17, 0)

    # the layout, spelled out from the protocol docs rather than through our encoder
    key = struct.pack(">hh", 0, int(commit))
    value = struct.pack(">hi", 0, 17)
    body = b"\x00\x00\x00" + b"\x08" + key + b"\x0c" + value + b"\x00"
    assert batch[HEADER_SIZE:] == bytes([len(body) * 2]) + body

    # third-party readers see a marker of the right kind
    (kr,) = list(KpBatch(batch))
    assert kr.commit is commit and kr.abort is not commit
    (ar,) = list(AioBatch(batch))
    assert AioControlRecord.parse(ar.key) == AioControlRecord(0, int(commit))


def test_parse_control_record_edge_cases() -> None:
    """Too short or a negative version is Kafka's InvalidRecordException: INVALID_RECORD."""
    assert_code(ErrorCode.INVALID_RECORD, parse_control_record, b"\x00\x00\x00", b"")
    assert_code(ErrorCode.INVALID_RECORD, parse_control_record, None, None)
    assert_code(ErrorCode.INVALID_RECORD, parse_control_record, struct.pack(">hh", 0, 1), b"\x00\x00")
    assert_code(ErrorCode.INVALID_RECORD, parse_control_record, struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 3))
    # a newer version with extra trailing fields still parses
    longer = parse_control_record(struct.pack(">hhi", 1, 0, 0), struct.pack(">hiq", 1, 8, 0))
    assert (longer.version, longer.is_abort, longer.coordinator_epoch) == (1, True, 8)
    # KRaft control types are recognised, not misread as markers
    other = parse_control_record(struct.pack(">hh", 0, CONTROL_LEADER_CHANGE), b"whatever")
    assert not other.is_transaction_marker and other.coordinator_epoch == -1


CONTROL_CASES = [
    (struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 7)),  # commit, coordinator epoch 7
    (struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 2)),  # abort
    (struct.pack(">hhi", 1, 0, 0), struct.pack(">hiq", 1, 8, 0)),  # newer versions, trailing fields
    (struct.pack(">hh", 0, CONTROL_LEADER_CHANGE), b"whatever"),  # not a transaction marker
    (b"\x00\x00\x00", b""),  # key too short
    (None, None),
    (struct.pack(">hh", 0, 1), b"\x00\x00"),  # marker value too short
    (struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 3)),  # negative key version
    (struct.pack(">hh", 0, 1), struct.pack(">hi", -2, 3)),  # negative value version
]


@pytest.mark.parametrize(("key", "value"), CONTROL_CASES)
def test_the_append_path_and_the_decoding_path_read_a_control_record_alike(key: bytes | None,
                                                                         value: bytes | None) -> None:
    """Producer state reads a marker in place; the cleaner, the group loader and clients decode
    the batch first. Both go through protocol/control.py, so they agree on every record: the same
    marker, no marker, or the same error."""
    batch = _assemble([_encode_record(0, 0, key, value, ())], 1, base_offset=0, last_offset_delta=0,
                      base_timestamp=TS, max_timestamp=TS, producer_id=5, producer_epoch=1, base_sequence=-1,
                      transactional=True, control=True, compression_type=0, partition_leader_epoch=0,
                      timestamp_type=0)

    def outcome(fn: Any) -> object:
        try:
            return fn()
        except KafkaError as e:
            return e.code

    def in_place() -> object:
        m = read_transaction_marker(batch, 0, read_header(batch))
        return None if m is None else (m.is_abort, m.coordinator_epoch)

    def decoded() -> object:
        _, recs = decode_batch(batch, 0)
        m = parse_control_record(recs[0].key, recs[0].value)
        return (m.is_abort, m.coordinator_epoch) if m.is_transaction_marker else None

    assert outcome(in_place) == outcome(decoded)


# --- corrupt input ------------------------------------------------------------------------------------

def test_every_flipped_byte_under_the_crc_is_caught() -> None:
    batch = build_batch_from_messages(SAMPLE[:2], producer_id=1, producer_epoch=0, base_sequence=0)
    for i in range(CRC_OFFSET, len(batch)):
        bad = bytearray(batch)
        bad[i] ^= 0xFF
        assert_code(ErrorCode.CORRUPT_MESSAGE, check_valid, bad)
        assert_code(ErrorCode.CORRUPT_MESSAGE, decode_batch, bad)


def test_base_offset_and_leader_epoch_are_outside_the_crc() -> None:
    bad = bytearray(build_batch_from_messages(SAMPLE))
    for i in (0, 7, 12, 15):  # the broker rewrites these without touching the CRC
        bad[i] ^= 0x55
    check_valid(bad)


def test_truncated_batch() -> None:
    batch = build_batch_from_messages(SAMPLE, compression=1)
    for n in range(len(batch)):
        assert_code(ErrorCode.CORRUPT_MESSAGE, decode_batch, batch[:n])
        if n:
            assert_code(ErrorCode.CORRUPT_MESSAGE, lambda b: list(iter_batches(b)), batch[:n])
    assert list(decode_batches(batch[:-1])) == []  # a fetch response's torn tail is just skipped


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_bad_magic(magic: int) -> None:
    bad = bytearray(build_batch_from_messages(SAMPLE))
    bad[16] = magic
    with pytest.raises(KafkaError) as ei:
        check_valid(bad)
    # Kafka answers a produce with a magic 0/1 batch with INVALID_RECORD; the decoder must agree
    # with whatever protocol.batch decides
    assert ei.value.code in (ErrorCode.INVALID_RECORD, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT)
    assert_code(ei.value.code, decode_batch, bad)
    assert_code(ei.value.code, decode_batch, bad, check_crc=False)


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_bad_compression_id(codec_id: int) -> None:
    bad = bytearray(build_batch_from_messages(SAMPLE))
    bad[22] = (bad[22] & ~0x07) | codec_id
    fix_crc(bad)
    assert_code(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, check_valid, bad)
    assert_code(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, decode_batch, bad)
    assert_code(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, decode_batch, bad, check_crc=False)


def test_compression_flag_on_uncompressed_records() -> None:
    bad = bytearray(build_batch_from_messages(SAMPLE))
    bad[22] |= 3  # claims lz4, holds plain records
    fix_crc(bad)
    assert_code(ErrorCode.CORRUPT_MESSAGE, decode_batch, bad)


@pytest.mark.parametrize("delta", [-1, 1, 1000])
def test_wrong_record_count(delta: int) -> None:
    bad = bytearray(build_batch_from_messages(SAMPLE))
    struct.pack_into(">i", bad, 57, len(SAMPLE) + delta)
    fix_crc(bad)
    assert_code(ErrorCode.CORRUPT_MESSAGE, decode_batch, bad)


def test_wrong_record_length() -> None:
    bad = bytearray(build_batch_from_messages([(b"k", b"v", [], TS)]))
    assert bad[HEADER_SIZE] == 16  # zig-zag 8: attrs, ts, offset, 1+1 key, 1+1 value, headers
    for wrong in (14, 18, 0x7E, 0x01):
        bad[HEADER_SIZE] = wrong
        fix_crc(bad)
        assert_code(ErrorCode.CORRUPT_MESSAGE, decode_batch, bad)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codec=st.sampled_from([0, 0, 0, 1, 2]), edits=st.lists(
    st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4))
def test_fuzzed_records_fail_cleanly(codec: int, edits: list[tuple[int, int]]) -> None:
    """Bytes that pass the CRC but are garbage must give CORRUPT_MESSAGE, never a stray
    IndexError or ValueError: the decoder also runs on logs a crash may have mangled."""
    good = build_batch_from_messages(SAMPLE, compression=codec)
    bad = bytearray(good)
    for at, byte in edits:
        bad[HEADER_SIZE + at % (len(bad) - HEADER_SIZE)] = byte
    fix_crc(bad)
    try:
        decode_batch(bytes(bad) + good)  # trailing bytes must not be read as part of the batch
    except KafkaError as e:
        assert e.code in (ErrorCode.CORRUPT_MESSAGE,)


# --- cross-checks against kafka-python and aiokafka ---------------------------------------------------

blobs = st.none() | st.binary(max_size=40) | st.binary(min_size=60, max_size=300)
headers_st = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=3)
producer_st = st.one_of(
    st.just((-1, -1, -1, False)),
    st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**15 - 1), st.integers(0, 2**31 - 1), st.booleans()),
)


@st.composite
def messages(draw: st.DrawFn, min_size: int = 1, max_size: int = 12) -> list[Msg]:
    base = draw(st.integers(0, 2**42))
    n = draw(st.integers(min_size, max_size))
    return [(draw(blobs), draw(blobs), draw(headers_st), base + draw(st.integers(-100_000, 100_000)))
            for _ in range(n)]


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(msgs=messages(), producer=producer_st)
def test_uncompressed_bytes_identical_to_kafka_python(msgs: list[Msg], producer: tuple[int, int, int, bool]) -> None:
    pid, epoch, seq, txn = producer
    theirs = kp_build(msgs, pid=pid, epoch=epoch, seq=seq, txn=txn)
    ours = build_batch_from_messages(msgs, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                     transactional=txn, partition_leader_epoch=0)
    assert ours == theirs
    assert our_records(theirs) == expected(msgs)
    assert their_records(ours) == expected(msgs)


@FAST
@given(msgs=messages(), gaps=st.lists(st.integers(1, 20_000), min_size=12, max_size=12))
def test_build_batch_with_offset_gaps_identical_to_kafka_python(msgs: list[Msg], gaps: list[int]) -> None:
    offsets = [sum(gaps[:i]) for i in range(len(msgs))]
    base_ts = msgs[0][3]
    records = [Record(o, ts - base_ts, k, v, tuple(hs)) for o, (k, v, hs, ts) in zip(offsets, msgs, strict=False)]
    ours = build_batch(records, base_offset=0, base_timestamp=base_ts, partition_leader_epoch=0)
    assert ours == kp_build(msgs, offsets=offsets)
    assert [r.offset for r in decode_batch(ours)[1]] == offsets


@FAST
@given(msgs=messages(), producer=producer_st)
def test_gzip_both_ways_with_kafka_python(msgs: list[Msg], producer: tuple[int, int, int, bool]) -> None:
    pid, epoch, seq, txn = producer
    theirs = kp_build(msgs, codec=1, pid=pid, epoch=epoch, seq=seq, txn=txn)
    assert our_records(theirs) == expected(msgs)  # kafka-python may send it uncompressed if smaller
    ours = build_batch_from_messages(msgs, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                     transactional=txn, compression=1)
    assert codec_of(ours) == 1
    assert their_records(ours) == expected(msgs)
    h, th = read_header(ours), KpBatch(ours)
    assert (th.producer_id, th.producer_epoch, th.base_sequence, th.is_transactional) == (pid, epoch, seq, txn)
    assert (th.first_timestamp, th.max_timestamp, th.last_offset_delta) == (
        h.base_timestamp, h.max_timestamp, h.last_offset_delta)


@FAST
@given(msgs=messages(max_size=20), codec=st.sampled_from([1, 2, 3, 4]))
def test_all_codecs_both_ways_with_aiokafka(msgs: list[Msg], codec: int) -> None:
    # repeat the messages so that compression pays and aiokafka does not fall back to none
    msgs = [(k, v, hs, ts) for k, v, hs, ts in msgs] + [(b"pad", b"p" * 500, [], msgs[0][3])] * 4
    theirs = kp_build(msgs, codec=codec, builder=AioBuilder)
    assert codec_of(theirs) == codec
    assert our_records(theirs) == expected(msgs)
    ours = build_batch_from_messages(msgs, compression=codec)
    assert codec_of(ours) == codec
    assert their_records(ours, AioBatch) == expected(msgs)


def test_kafka_python_gzip_large_batch() -> None:
    msgs: list[Msg] = [(b"k%d" % i, b"payload %d " % i * 20, [], TS + i) for i in range(2000)]
    theirs = kp_build(msgs, codec=1)
    assert codec_of(theirs) == 1
    assert our_records(theirs) == expected(msgs)
    assert their_records(build_batch_from_messages(msgs, compression=1)) == expected(msgs)
