"""Control records: the one codec of what a control batch says (docs/record-batches.md).

A control batch is the broker's own, never a client's: its one record says whether a transaction
committed or aborted and under which coordinator epoch. Producer state, the log cleaner, the group
coordinator's loader and clients all read it, so they share this reading — one rule for what is
malformed, one error for it.

    key   = version int16, type int16 (0 = ABORT, 1 = COMMIT; 2-4 are KRaft metadata-log types)
    value = version int16, coordinator_epoch int32          (ABORT and COMMIT only)

Later key and value versions may append fields, so only a minimum length is required, as in
Kafka's ControlRecordType and EndTransactionMarker; a negative version, or a key or marker value
too short, is INVALID_RECORD (Kafka's InvalidRecordException).
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from .batch import HEADER_SIZE, BatchHeader
from .errors import ErrorCode, KafkaError
from .primitives import DecodeError, Reader

# Only the first two appear in a data partition; the rest are KRaft metadata-log types, listed so
# they can be recognised and skipped rather than misread.
CONTROL_ABORT: Final = 0
CONTROL_COMMIT: Final = 1
CONTROL_LEADER_CHANGE: Final = 2
CONTROL_SNAPSHOT_HEADER: Final = 3
CONTROL_SNAPSHOT_FOOTER: Final = 4

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlRecord(NamedTuple):
    """A parsed control record. coordinator_epoch is only meaningful for ABORT/COMMIT markers
    (the other types carry a different value) and is -1 for them."""

    version: int
    type: int
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.type == CONTROL_COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type == CONTROL_ABORT

    @property
    def is_transaction_marker(self) -> bool:
        return self.type == CONTROL_ABORT or self.type == CONTROL_COMMIT


def control_record_key(commit: bool) -> bytes:
    return _KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)


def control_record_value(coordinator_epoch: int) -> bytes:
    return _VALUE.pack(0, coordinator_epoch)


def _bad(what: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_RECORD, what)


def parse_control_record(key: bytes | bytearray | memoryview | None,
                         value: bytes | bytearray | memoryview | None) -> ControlRecord:
    """Read a control record's key (and, for a transaction marker, its value)."""
    if key is None or len(key) < _KEY.size:
        raise _bad(f"control record key of {0 if key is None else len(key)} bytes, fewer than {_KEY.size}")
    version, ctype = _KEY.unpack_from(key)
    if version < 0:
        raise _bad(f"control record key version {version}")
    if ctype != CONTROL_ABORT and ctype != CONTROL_COMMIT:
        return ControlRecord(version, ctype, -1)
    if value is None or len(value) < _VALUE.size:
        raise _bad(f"transaction marker value of {0 if value is None else len(value)} bytes, fewer than {_VALUE.size}")
    value_version, coordinator_epoch = _VALUE.unpack_from(value)
    if value_version < 0:
        raise _bad(f"transaction marker value version {value_version}")
    return ControlRecord(version, ctype, coordinator_epoch)


def read_transaction_marker(buf: bytes | bytearray | memoryview, pos: int,
                            header: BatchHeader) -> ControlRecord | None:
    """The transaction marker of the control batch at `pos` of `buf`, read in place (the append
    path must not decode a whole batch); None if the batch holds no marker.

    None covers an empty control batch (compaction may leave one) and control types other than
    commit/abort (KRaft's leader-change and snapshot records never reach partition logs, but they
    must not be mistaken for a transaction end)."""
    if header.records_count == 0:
        return None
    if header.compression != 0:
        raise _bad("compressed control batch")
    try:
        r = Reader(buf, pos + HEADER_SIZE, pos + header.size)
        r.varint()  # record length
        r.int8()  # attributes
        r.varint()  # timestamp delta
        r.varint()  # offset delta
        key_len = r.varint()
        key = r.view(key_len) if key_len >= 0 else None
        value_len = r.varint()
        value = r.view(value_len) if value_len >= 0 else None
    except DecodeError as e:
        raise _bad(f"unreadable control record: {e}") from e
    marker = parse_control_record(key, value)
    return marker if marker.is_transaction_marker else None
