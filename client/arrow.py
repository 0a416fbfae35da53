"""Record batches to Arrow columns and back, without a Python object per record.

A columnar reader (the Spark source in pipeline/) takes a consumer's fetched batches whole
(`Consumer.getmany_batches`) and turns them into one Arrow record batch (`to_arrow`); a columnar
writer turns Arrow key and value columns into framed records (`encode`) and sends each run as one
batch (`Producer.send_batch`), partitioned as send() would (`partitions_for_keys`). Per record
only the walk along the record lengths (each record's place depends on the one before) runs in
Python; every other step is one Arrow compute call over all records of a fetch or a chunk.

Needs pyarrow (the `pipeline` extra); nothing else in client/ imports this module.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from protocol import compression
from protocol.batch import COMPRESSION_MASK, HEADER_SIZE, LOG_OVERHEAD, TIMESTAMP_TYPE_MASK, validate
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import DecodeError, decode_varint, encode_varint
from protocol.records import now_ms

from .isolation import FetchedBatches
from .partitioner import MURMUR2_M, MURMUR2_SEED, murmur2
from .structs import EncodedRecords

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
# What to_arrow returns: one row per record, in offset order (topic and partition are the fetch's).
RECORD_SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.int64()),  # milliseconds since the epoch
    pa.field("timestamp_type", pa.int32()),  # 0 create time, 1 log append time
    pa.field("headers", pa.list_(HEADER_TYPE)),
])

BATCH_OVERHEAD = 61  # a batch's header
_MIN_RECORD = 7  # length, attributes, two deltas, key and value lengths, header count: one byte each
_VARINT_TABLE_SIZE = 1 << 15
_LONG_KEY = 64  # longer keys are hashed one by one (rare; keeps the word loop short)

# Arrow converts a Python int argument to a scalar through a lookup that tries to import numpy,
# every call when numpy is absent: scalars are made once.
_scalars: dict[tuple[int, pa.DataType], pa.Scalar] = {}
_INT64 = pa.int64()


def _s(v: int, t: pa.DataType = _INT64) -> pa.Scalar:
    key = (v, t)
    got = _scalars.get(key)
    if got is None:
        got = _scalars[key] = pa.scalar(v, t)
    return got


_arange_cache: pa.Array | None = None


def _arange(n: int) -> pa.Array:
    global _arange_cache
    if _arange_cache is None or len(_arange_cache) < n:
        _arange_cache = pa.array(range(max(n, 1 << 16)), pa.int64())
    return _arange_cache.slice(0, n)


_varint_table: pa.Array | None = None


def _varints(values: pa.Array) -> pa.Array:
    """Zig-zag varint encodings of int64 `values` (all >= -1) as a binary array: element i + 1 of
    a table holds the encoding of i, so a lookup is one take(); larger values are encoded one by one."""
    global _varint_table
    if _varint_table is None:
        _varint_table = pa.array([encode_varint(i - 1) for i in range(_VARINT_TABLE_SIZE)], pa.binary())
    if len(values) and pc.max(values).as_py() >= _VARINT_TABLE_SIZE - 1:
        return pa.array([encode_varint(v) for v in values.to_pylist()], pa.binary())
    return pc.take(_varint_table, pc.add(values, _s(1)))


def _corrupt(why: str) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, why)


# ---------------------------------------------------------------------------------------- decoding


def _read_varints(u: pa.Array, pos: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The zig-zag varints at positions `pos` of the bytes `u`: (values, positions after them)."""
    b = pc.take(u, pos).cast(pa.int64())
    more = pc.greater_equal(b, _s(0x80))
    if pc.any(more).as_py():
        last = _s(len(u) - 1)
        size = pc.if_else(more, _s(2), _s(1))
        b = pc.bit_wise_and(b, _s(0x7F))
        for k in range(1, 10):
            nxt = pc.take(u, pc.min_element_wise(pc.add(pos, _s(k)), last)).cast(pa.int64())
            b = pc.if_else(more, pc.bit_wise_or(b, pc.shift_left(pc.bit_wise_and(nxt, _s(0x7F)), _s(7 * k))), b)
            more = pc.and_(more, pc.greater_equal(nxt, _s(0x80)))
            if not pc.any(more).as_py():
                break
            size = pc.add(size, pc.if_else(more, _s(1), _s(0)))
        else:
            raise _corrupt("varint longer than 10 bytes")
        pos = pc.add(pos, size)
    else:
        pos = pc.add(pos, _s(1))
    return pc.bit_wise_xor(pc.shift_right(b, _s(1)), pc.negate(pc.bit_wise_and(b, _s(1)))), pos


def _walk(data: bytes, start: int, end: int, count: int, ends: list[int]) -> None:
    """Append where each of `count` records in data[start:end] ends: the one step that must go
    record by record (a record's place depends on the length of the one before). The lengths are
    read as if non-negative; the vectorised pass reads them again properly and checks they agree."""
    if count < 0 or count * _MIN_RECORD > end - start:
        raise _corrupt(f"{count} records cannot fit in {end - start} bytes")
    ea = ends.append
    p = start
    for _ in range(count):
        b = data[p]
        if b < 0x80:
            p += 1 + (b >> 1)
        else:
            c = data[p + 1]
            if c < 0x80:
                p += 2 + (((b & 0x7F) | (c << 7)) >> 1)
            else:
                n, p = decode_varint(data, p)
                p += n
        ea(p)
    if p != end:
        raise _corrupt(f"records end at {p - start} of a {end - start}-byte batch")


def _per_record(values: list[int], counts: pa.Array, t: pa.DataType) -> pa.Array:
    """Each batch's value repeated for each of its records."""
    return pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(pc.cumulative_sum(counts), pa.array(values, t)))


def to_arrow(fetched: FetchedBatches) -> pa.RecordBatch:
    """The records of `fetched` as columns (RECORD_SCHEMA), CRCs checked as the consumer would."""
    try:
        return _to_arrow(fetched)
    except (IndexError, DecodeError, pa.ArrowIndexError, pa.ArrowInvalid) as e:
        raise _corrupt(f"malformed record: {e}") from e


def _to_arrow(fetched: FetchedBatches) -> pa.RecordBatch:
    buf = fetched.buffer
    sections: list[bytes | memoryview] = []
    ends: list[int] = []  # of each record, in its batch's own coordinates
    shifts: list[int] = []  # per batch: from those to the joined sections'
    counts: list[int] = []
    base_offsets: list[int] = []
    base_ts: list[int] = []
    log_append: list[int] = []
    base = 0
    view = memoryview(buf)
    for pos, h in fetched.batches:
        size = h.batch_length + LOG_OVERHEAD
        if h.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + size > len(buf):
            raise _corrupt(f"truncated batch at {pos}")
        if fetched.check_crc:
            validate(buf, pos, size, h)
        codec = h.attributes & COMPRESSION_MASK
        data: bytes
        if codec:
            data = compression.decompress(codec, view[pos + HEADER_SIZE:pos + size])
            start, end = 0, len(data)
        else:
            data, start, end = buf, pos + HEADER_SIZE, pos + size
        _walk(data, start, end, h.records_count, ends)
        sections.append(data if codec else view[start:end])
        shifts.append(base - start)
        base += end - start
        counts.append(h.records_count)
        base_offsets.append(h.base_offset)
        if h.attributes & TIMESTAMP_TYPE_MASK:
            base_ts.append(h.max_timestamp)
            log_append.append(1)
        else:
            base_ts.append(h.base_timestamp)
            log_append.append(0)
    n = len(ends)
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=RECORD_SCHEMA)
    joined = b"".join(sections)
    u = pa.Array.from_buffers(pa.uint8(), len(joined), [None, pa.py_buffer(joined)])
    per_batch = pa.array(counts, pa.int32())
    record_end = pc.add(pa.array(ends, pa.int64()), _per_record(shifts, per_batch, pa.int64()))
    # sections are joined back to back and each is filled by its records: a record starts where
    # the one before it ends
    record_start = pa.concat_arrays([pa.array([0], pa.int64()), record_end.slice(0, n - 1)])
    length, begin = _read_varints(u, record_start)
    if not pc.all(pc.equal(pc.add(begin, length), record_end)).as_py():
        raise _corrupt("a record length is negative")
    ts_delta, p = _read_varints(u, pc.add(begin, _s(1)))  # after the attributes byte
    off_delta, p = _read_varints(u, p)
    key_len, key_start = _read_varints(u, p)
    key_end = pc.add(key_start, pc.max_element_wise(key_len, _s(0)))
    value_len, value_start = _read_varints(u, key_end)
    value_end = pc.add(value_start, pc.max_element_wise(value_len, _s(0)))
    header_count, p = _read_varints(u, value_end)
    if pc.any(pc.or_(pc.less(key_len, _s(-1)), pc.less(value_len, _s(-1)))).as_py():
        raise _corrupt("negative key or value length")
    if pc.any(pc.not_equal(header_count, _s(0))).as_py():
        return _with_headers(fetched)  # rare: decoded record by record
    if not pc.all(pc.equal(p, record_end)).as_py():
        raise _corrupt("a record's fields do not add up to its length")
    # Keys and values are runs of `joined`: one binary array whose segments alternate key, length
    # prefix, value, rest of the record points into it without a copy; take() then copies the key
    # and value segments out, each into a contiguous column.
    bounds = pa.concat_arrays([key_start, key_end, value_start, value_end])
    a = _arange(4 * n)
    order = pc.add(pc.multiply(pc.bit_wise_and(a, _s(3)), _s(n)), pc.shift_right(a, _s(2)))
    offsets = pa.concat_arrays([pc.take(bounds, order), value_end.slice(n - 1)]).cast(pa.int32())
    segments = pa.BinaryArray.from_buffers(pa.binary(), 4 * n, [None, offsets.buffers()[1], u.buffers()[1]])
    every4 = pc.multiply(_arange(n), _s(4))
    keys = pc.take(segments, every4)
    values = pc.take(segments, pc.add(every4, _s(2)))
    null = pa.scalar(None, pa.binary())
    if pc.any(pc.equal(key_len, _s(-1))).as_py():
        keys = pc.if_else(pc.equal(key_len, _s(-1)), null, keys)
    if pc.any(pc.equal(value_len, _s(-1))).as_py():
        values = pc.if_else(pc.equal(value_len, _s(-1)), null, values)
    offsets_col = pc.add(_per_record(base_offsets, per_batch, pa.int64()), off_delta)
    appended = _per_record(log_append, per_batch, pa.int32())
    timestamps = pc.add(_per_record(base_ts, per_batch, pa.int64()),
                        pc.multiply(ts_delta, pc.subtract(_s(1), appended.cast(pa.int64()))))
    headers = pa.ListArray.from_arrays(pa.repeat(_s(0, pa.int32()), n + 1), pa.array([], HEADER_TYPE))
    batch = pa.RecordBatch.from_arrays([keys, values, offsets_col, timestamps, appended, headers],
                                       schema=RECORD_SCHEMA)
    if fetched.batches[0][1].base_offset < fetched.fetch_offset:
        batch = batch.filter(pc.greater_equal(offsets_col, _s(fetched.fetch_offset)))
    return batch


def _with_headers(fetched: FetchedBatches) -> pa.RecordBatch:
    recs = fetched.records()
    return pa.RecordBatch.from_arrays([
        pa.array([r.key for r in recs], pa.binary()),
        pa.array([r.value for r in recs], pa.binary()),
        pa.array([r.offset for r in recs], pa.int64()),
        pa.array([r.timestamp for r in recs], pa.int64()),
        pa.array([r.timestamp_type for r in recs], pa.int32()),
        pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in recs], pa.list_(HEADER_TYPE)),
    ], schema=RECORD_SCHEMA)


# ---------------------------------------------------------------------------------------- encoding


def _binary(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_binary(col.type):
        return col
    if pa.types.is_string(col.type) or pa.types.is_large_binary(col.type) or pa.types.is_large_string(col.type):
        return col.cast(pa.binary())
    raise TypeError(f"keys and values must be binary or string, not {col.type}")


def _lengths(col: pa.Array) -> pa.Array:
    """Byte lengths as int64, -1 for null (how a record says null)."""
    return pc.fill_null(pc.binary_length(col).cast(pa.int64()), _s(-1))


def encode(keys: pa.Array | pa.ChunkedArray | None, values: pa.Array | pa.ChunkedArray, *, max_bytes: int,
           timestamp_ms: int | None = None) -> list[EncodedRecords]:
    """Frame the records (keys[i], values[i]), in order, as runs for Producer.send_batch(): each run
    at most `max_bytes` with its batch header (a single record larger than that is a run of its
    own). Every record gets `timestamp_ms` (default now) and no headers; None keys or values are
    nulls, and `keys=None` means every key is null."""
    values = _binary(values)
    n = len(values)
    if n == 0:
        return []
    keys = _binary(keys) if keys is not None else pa.nulls(n, pa.binary())
    if len(keys) != n:
        raise ValueError(f"{len(keys)} keys for {n} values")
    ts = now_ms() if timestamp_ms is None else timestamp_ms
    key_len, value_len = _lengths(keys), _lengths(values)
    key_varint, value_varint = _varints(key_len), _varints(value_len)
    # Which records share a batch, from a size that can only overestimate (the offset delta's and
    # the length's varints at their widest): then no run outgrows max_bytes.
    fixed = pc.add(pc.add(pc.binary_length(key_varint), pc.binary_length(value_varint)).cast(pa.int64()),
                   pc.add(pc.max_element_wise(key_len, _s(0)), pc.max_element_wise(value_len, _s(0))))
    estimate = pc.add(fixed, _s(3 + 2 + 3 + 1))  # length, attributes + timestamp delta, offset delta, headers
    biggest = pc.max(estimate).as_py()
    budget = max(max_bytes - BATCH_OVERHEAD - biggest, 1)
    before = pc.subtract(pc.cumulative_sum(estimate), estimate)
    per_run = _VARINT_TABLE_SIZE - 2  # offset deltas stay table lookups
    runs_by_count = n // per_run + 1
    run = pc.add(pc.multiply(pc.divide(before, _s(budget)), _s(runs_by_count)),
                 pc.divide(_arange(n), _s(per_run)))
    ree = pc.run_end_encode(run)
    run_ends = ree.run_ends.cast(pa.int64())
    run_starts = _shift(run_ends)
    first_of_run = pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(run_ends, run_starts))
    offset_varint = _varints(pc.subtract(_arange(n), first_of_run))
    body = pc.add(fixed, pc.add(pc.binary_length(offset_varint).cast(pa.int64()), _s(2 + 1)))
    empty = pa.scalar(b"", pa.binary())
    records = pc.binary_join_element_wise(
        _varints(body), pa.scalar(b"\x00\x00", pa.binary()), offset_varint, key_varint,
        pc.fill_null(keys, empty), value_varint, pc.fill_null(values, empty), pa.scalar(b"\x00", pa.binary()),
        empty)
    data = records.buffers()[2]
    bounds = pc.take(_offsets(records), pa.concat_arrays([run_starts.slice(0, 1), run_ends])).to_pylist()
    counts = pc.subtract(run_ends, run_starts).to_pylist()
    return [EncodedRecords(memoryview(data.slice(bounds[i], bounds[i + 1] - bounds[i])), counts[i], ts, ts)
            for i in range(len(counts))]


def _offsets(col: pa.Array) -> pa.Array:
    """The int32 offsets of a binary array (len + 1 of them), as an array."""
    return pa.Array.from_buffers(pa.int32(), len(col) + 1, [None, col.buffers()[1]], offset=col.offset)


def _shift(run_ends: pa.Array) -> pa.Array:
    """Where each run starts: 0, then the previous run's end."""
    return pa.concat_arrays([pa.array([0], pa.int64()), run_ends.slice(0, len(run_ends) - 1)])


# ------------------------------------------------------------------------------------ partitioning


def partitions_for_keys(keys: pa.Array | pa.ChunkedArray, num_partitions: int) -> pa.Array:
    """The partition send() would choose for each key (murmur2, as Java's default partitioner);
    null where the key is null, for the caller's sticky choice. Each distinct key is hashed once."""
    keys = _binary(keys)
    encoded = keys.dictionary_encode()
    distinct = encoded.dictionary
    hashes = _murmur2(distinct)
    parts = pc.bit_wise_and(hashes.cast(pa.int64()), _s(0x7FFFFFFF))
    parts = pc.subtract(parts, pc.multiply(pc.divide(parts, _s(num_partitions)), _s(num_partitions)))
    return pc.take(parts.cast(pa.int32()), encoded.indices)


def _murmur2(keys: pa.Array) -> pa.Array:
    """murmur2 of every (non-null) key as uint32, word by word across all keys at once."""
    n = len(keys)
    if n == 0:
        return pa.array([], pa.uint32())
    u32 = pa.uint32()
    lengths = pc.binary_length(keys).cast(pa.int64())
    longest = pc.max(lengths).as_py()
    if longest > _LONG_KEY:
        return pa.array([murmur2(k) & 0xFFFFFFFF for k in keys.to_pylist()], u32)
    data = keys.buffers()[2]
    size = data.size if data is not None else 0
    if size == 0:
        u = pa.array([0], pa.uint8())
    else:
        u = pa.Array.from_buffers(pa.uint8(), size, [None, data])
    start = _offsets(keys).slice(0, n).cast(pa.int64())
    last = _s(max(size - 1, 0))
    m = _s(MURMUR2_M, u32)

    def byte(at: pa.Array) -> pa.Array:
        return pc.take(u, pc.min_element_wise(at, last)).cast(u32)

    def mul(x: pa.Array) -> pa.Array:
        return pc.multiply(x, m)  # wraps modulo 2**32, as murmur2 wants

    h = pc.bit_wise_xor(_s(MURMUR2_SEED, u32), lengths.cast(u32))
    n4 = pc.bit_wise_and(lengths, _s(~3))
    for w in range(0, longest & ~3, 4):
        at = pc.add(start, _s(w))
        k = pc.bit_wise_or(pc.bit_wise_or(byte(at), pc.shift_left(byte(pc.add(at, _s(1))), _s(8, u32))),
                           pc.bit_wise_or(pc.shift_left(byte(pc.add(at, _s(2))), _s(16, u32)),
                                          pc.shift_left(byte(pc.add(at, _s(3))), _s(24, u32))))
        k = mul(k)
        k = pc.bit_wise_xor(k, pc.shift_right(k, _s(24, u32)))
        k = mul(k)
        h = pc.if_else(pc.greater(n4, _s(w)), pc.bit_wise_xor(mul(h), k), h)
    rest = pc.bit_wise_and(lengths, _s(3))
    tail = pc.add(start, n4)
    zero = _s(0, u32)
    h = pc.bit_wise_xor(h, pc.if_else(pc.equal(rest, _s(3)),
                                      pc.shift_left(byte(pc.add(tail, _s(2))), _s(16, u32)), zero))
    h = pc.bit_wise_xor(h, pc.if_else(pc.greater_equal(rest, _s(2)),
                                      pc.shift_left(byte(pc.add(tail, _s(1))), _s(8, u32)), zero))
    has_tail = pc.greater_equal(rest, _s(1))
    h = pc.if_else(has_tail, mul(pc.bit_wise_xor(h, byte(tail))), h)
    h = pc.bit_wise_xor(h, pc.shift_right(h, _s(13, u32)))
    h = mul(h)
    return pc.bit_wise_xor(h, pc.shift_right(h, _s(15, u32)))


__all__ = ["RECORD_SCHEMA", "encode", "partitions_for_keys", "to_arrow"]
