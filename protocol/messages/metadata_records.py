"""Records of the metadata log (`__cluster_metadata`), in Kafka's framing.

Kafka declares them like API messages (metadata/src/main/resources/common/metadata/*.json) and
writes each as a record value: unsigned varint frame version (1), unsigned varint record type,
unsigned varint record version, then the record in the flexible encoding. Declared here with the
shared codec; `frame` and `unframe` do the wrapping. Only the record types Ketch writes so far are
declared; an unknown type is a DecodeError, which the broker logs without applying anything.
"""

from __future__ import annotations

from ..primitives import DecodeError, Reader, Writer
from ..schema import INT32, INT64, Message, f, schema

FRAME_VERSION = 1


class _MetadataRecord(Message):
    __slots__ = ()
    API_KEY = -1
    RECORD_TYPE = -1


@schema
class ProducerIdsRecord(_MetadataRecord):
    """A block of producer ids handed to a broker: ids below `next_producer_id` are taken."""

    RECORD_TYPE = 15
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    broker_id: int = f(INT32)
    broker_epoch: int = f(INT64, default=-1)
    next_producer_id: int = f(INT64)


RECORD_TYPES: dict[int, type[_MetadataRecord]] = {cls.RECORD_TYPE: cls for cls in (ProducerIdsRecord,)}


def frame(record: _MetadataRecord, version: int = 0) -> bytes:
    w = Writer()
    w.uvarint(FRAME_VERSION)
    w.uvarint(record.RECORD_TYPE)
    w.uvarint(version)
    record.write(w, version)
    return w.getvalue()


def unframe(data: bytes) -> _MetadataRecord:
    r = Reader(data)
    frame_version = r.uvarint()
    if frame_version != FRAME_VERSION:
        raise DecodeError(f"metadata record frame version {frame_version} (only {FRAME_VERSION} is known)")
    record_type, version = r.uvarint(), r.uvarint()
    cls = RECORD_TYPES.get(record_type)
    if cls is None:
        raise DecodeError(f"unknown metadata record type {record_type}")
    lo, hi = cls.VERSIONS
    if not lo <= version <= hi:
        raise DecodeError(f"{cls.__name__} version {version} is unknown (known: {lo}-{hi})")
    msg = cls.read(r, version)
    if r.remaining():
        raise DecodeError(f"{cls.__name__}: {r.remaining()} bytes after the record")
    return msg
