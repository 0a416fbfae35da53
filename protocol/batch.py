"""Record batch v2 (magic 2) header: the 61 bytes the broker reads on the hot path.

The broker never decodes the records inside a client batch. It reads this header, checks the
CRC-32C (which covers attributes..end, so the base offset and the partition leader epoch can be
rewritten in place without recomputing it), and stores the bytes as they came.

Layout (big-endian):
    0 base_offset int64 | 8 batch_length int32 | 12 partition_leader_epoch int32 | 16 magic int8
    17 crc uint32 | 21 attributes int16 | 23 last_offset_delta int32 | 27 base_timestamp int64
    35 max_timestamp int64 | 43 producer_id int64 | 51 producer_epoch int16
    53 base_sequence int32 | 57 records_count int32 | 61 records...
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c

from .errors import ErrorCode, KafkaError

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # base_offset + batch_length: the part not counted by batch_length
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTR_OFFSET = 21

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_TIMESTAMP = struct.Struct(">q")


class BatchHeader(NamedTuple):
    """A NamedTuple rather than a frozen dataclass: it is built once per batch on the produce path,
    and a tuple is several times cheaper to make."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies in a log."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header at `pos`; the caller has checked at least HEADER_SIZE bytes are there."""
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C of the batch at `pos` whose total size is `size` (covers attributes..end)."""
    return crc32c.crc32c(memoryview(buf)[pos + ATTR_OFFSET : pos + size])  # type: ignore[no-any-return]


def validate(buf: bytes | bytearray | memoryview, pos: int, size: int, h: BatchHeader) -> None:
    """Check what a broker must check before it stores a client batch."""
    if h.magic != 2:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"magic {h.magic}; only magic 2 is accepted")
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"batch length {h.batch_length} below header size")
    if compute_crc(buf, pos, size) != h.crc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "CRC-32C mismatch")
    if h.last_offset_delta < 0 or h.records_count < 0:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "negative record count or offset delta")
    if h.compression > 4:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"compression {h.compression}")


def iter_batches(buf: bytes | bytearray | memoryview, *, strict: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each whole batch in a concatenation of batches.

    With strict, a trailing partial batch or a length that cannot be right raises CORRUPT_MESSAGE
    (a produce request must hold whole batches). Without it iteration stops at the partial batch
    (a fetch response may end with one, and a crashed log may have a torn tail).
    """
    n = len(buf)
    pos = 0
    while pos < n:
        if n - pos < HEADER_SIZE:
            if strict:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "truncated batch header")
            return
        if buf[pos + MAGIC_OFFSET] != 2:
            if strict:
                raise KafkaError(ErrorCode.INVALID_RECORD,
                                 f"magic {buf[pos + MAGIC_OFFSET]}; only magic 2 is accepted")
            return
        h = read_header(buf, pos)
        size = h.batch_length + LOG_OVERHEAD
        if h.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + size > n:
            if strict:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "batch length past end of data")
            return
        yield pos, h
        pos += size


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def set_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _LEADER_EPOCH.pack_into(buf, pos + 12, epoch)


def set_max_timestamp_log_append(buf: bytearray | memoryview, pos: int, size: int, now_ms: int) -> None:
    """Turn a batch into LogAppendTime: set the flag and max timestamp, then fix the CRC
    (both fields are inside the CRC)."""
    attrs = struct.unpack_from(">h", buf, pos + ATTR_OFFSET)[0] | TIMESTAMP_TYPE_MASK
    struct.pack_into(">h", buf, pos + ATTR_OFFSET, attrs)
    _TIMESTAMP.pack_into(buf, pos + 35, now_ms)
    struct.pack_into(">I", buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))
