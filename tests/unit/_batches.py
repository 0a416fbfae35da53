"""A tiny v2 record-batch builder for the storage tests (independent of protocol/records.py)."""

from __future__ import annotations

import struct

from protocol.batch import CONTROL_FLAG, TRANSACTIONAL_FLAG, compute_crc
from protocol.primitives import encode_varint

_HEADER = struct.Struct(">qiibIhiqqqhii")


def _record(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(b"\x00")
    body += encode_varint(ts_delta)
    body += encode_varint(offset_delta)
    for field in (key, value):
        if field is None:
            body += encode_varint(-1)
        else:
            body += encode_varint(len(field))
            body += field
    body += encode_varint(0)  # headers
    return encode_varint(len(body)) + bytes(body)


def _assemble(records: list[bytes], *, base_offset: int, attributes: int, last_offset_delta: int,
              base_timestamp: int, max_timestamp: int, producer_id: int, producer_epoch: int,
              base_sequence: int, leader_epoch: int) -> bytes:
    payload = b"".join(records)
    total = _HEADER.size + len(payload)
    buf = bytearray(_HEADER.pack(base_offset, total - 12, leader_epoch, 2, 0, attributes, last_offset_delta,
                                 base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
                                 len(records)))
    buf += payload
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, total))
    return bytes(buf)


def make_batch(count: int = 1, *, value_size: int = 10, timestamp: int = 1000, ts_step: int = 0,
               producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
               transactional: bool = False, base_offset: int = 0, leader_epoch: int = -1,
               payload: bytes | None = None) -> bytes:
    """A batch of `count` records with values of `value_size` bytes (or `payload` each)."""
    records = []
    for i in range(count):
        value = payload if payload is not None else bytes([65 + i % 26]) * value_size
        records.append(_record(i, i * ts_step, None, value))
    return _assemble(records, base_offset=base_offset, attributes=TRANSACTIONAL_FLAG if transactional else 0,
                     last_offset_delta=count - 1, base_timestamp=timestamp,
                     max_timestamp=timestamp + (count - 1) * ts_step, producer_id=producer_id,
                     producer_epoch=producer_epoch, base_sequence=base_sequence, leader_epoch=leader_epoch)


def make_marker(producer_id: int, producer_epoch: int, *, abort: bool, coordinator_epoch: int = 0,
                timestamp: int = 1000) -> bytes:
    """An end-transaction control batch (COMMIT or ABORT marker)."""
    key = struct.pack(">hh", 0, 0 if abort else 1)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return _assemble([_record(0, 0, key, value)], base_offset=0, attributes=TRANSACTIONAL_FLAG | CONTROL_FLAG,
                     last_offset_delta=0, base_timestamp=timestamp, max_timestamp=timestamp,
                     producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1, leader_epoch=-1)


def idem(seq: int, count: int = 1, *, pid: int = 7, epoch: int = 0, **kw: object) -> bytes:
    """An idempotent batch of producer `pid`."""
    return make_batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq, **kw)  # type: ignore[arg-type]
