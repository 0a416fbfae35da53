"""Reading transaction markers out of control batches.

Client data is never decoded, but a control batch is the broker's own: its one record says
whether the transaction committed or aborted and under which coordinator epoch, and producer
state needs both. Layout of that record (inside an uncompressed v2 batch):

    key   = version int16 (0), type int16 (0 = ABORT, 1 = COMMIT)
    value = version int16 (0), coordinator_epoch int32
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from protocol.batch import HEADER_SIZE, BatchHeader
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import DecodeError, Reader

ABORT = 0
COMMIT = 1

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    is_abort: bool
    coordinator_epoch: int


def read_end_txn_marker(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> EndTxnMarker | None:
    """The marker in the control batch at `pos` of `buf`; None if the batch holds no marker.

    None covers an empty control batch (compaction may leave one) and control types other than
    commit/abort (KRaft's leader-change and snapshot records never reach partition logs, but they
    must not be mistaken for a transaction end).
    """
    if header.records_count == 0:
        return None
    if header.compression != 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, "compressed control batch")
    try:
        r = Reader(buf, pos + HEADER_SIZE, pos + header.size)
        r.varint()  # record length
        r.int8()  # attributes
        r.varint()  # timestamp delta
        r.varint()  # offset delta
        key_len = r.varint()
        if key_len < _KEY.size:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"control record key of {key_len} bytes")
        _version, kind = _KEY.unpack_from(r.view(key_len))
        if kind not in (ABORT, COMMIT):
            return None
        value_len = r.varint()
        if value_len < _VALUE.size:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"end-txn marker value of {value_len} bytes")
        _version, coordinator_epoch = _VALUE.unpack_from(r.view(value_len))
    except DecodeError as e:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"unreadable control record: {e}") from e
    return EndTxnMarker(is_abort=kind == ABORT, coordinator_epoch=coordinator_epoch)
