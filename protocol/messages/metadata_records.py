"""Records of the metadata log (`__cluster_metadata`), in Kafka's framing.

Kafka declares them like API messages (metadata/src/main/resources/common/metadata/*.json) and
writes each as a record value: unsigned varint frame version (1), unsigned varint record type,
unsigned varint record version, then the record in the flexible encoding. Declared here with the
shared codec; `frame` and `unframe` do the wrapping. Only the record types Ketch writes so far are
declared; an unknown type is a DecodeError, which the broker logs without applying anything.
"""

from __future__ import annotations

import uuid

from ..primitives import DecodeError, Reader, Writer
from ..schema import BOOL, INT16, INT32, INT64, STRING, UINT16, UUID, Array, Message, Struct, f, schema

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


@schema
class BrokerEndpoint(Struct):
    name: str = f(STRING)
    host: str = f(STRING)
    port: int = f(UINT16)
    security_protocol: int = f(INT16)


@schema
class BrokerFeature(Struct):
    name: str = f(STRING)
    min_supported_version: int = f(INT16)
    max_supported_version: int = f(INT16)


@schema
class RegisterBrokerRecord(_MetadataRecord):
    """A broker joined (or rejoined with a new incarnation); it starts fenced. Ketch writes v1."""

    RECORD_TYPE = 0
    VERSIONS = (0, 3)
    FLEXIBLE = 0
    broker_id: int = f(INT32)
    is_migrating_zk_broker: bool = f(BOOL, "2+")
    incarnation_id: uuid.UUID = f(UUID)
    broker_epoch: int = f(INT64)
    end_points: list[BrokerEndpoint] = f(Array(BrokerEndpoint))
    features: list[BrokerFeature] = f(Array(BrokerFeature))
    rack: str | None = f(STRING, default=None)
    fenced: bool = f(BOOL, default=True)
    in_controlled_shutdown: bool = f(BOOL, "1+")
    log_dirs: list[uuid.UUID] = f(Array(UUID), "3+", tag=0, tagged="3+")


@schema
class FenceBrokerRecord(_MetadataRecord):
    """The broker missed its heartbeats (or asked to be fenced): it may lead nothing."""

    RECORD_TYPE = 7
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    id: int = f(INT32)
    epoch: int = f(INT64)


@schema
class UnfenceBrokerRecord(_MetadataRecord):
    """The broker caught up with the metadata log and heartbeats: it may lead again."""

    RECORD_TYPE = 8
    VERSIONS = (0, 0)
    FLEXIBLE = 0
    id: int = f(INT32)
    epoch: int = f(INT64)


RECORD_TYPES: dict[int, type[_MetadataRecord]] = {
    cls.RECORD_TYPE: cls for cls in (ProducerIdsRecord, RegisterBrokerRecord, FenceBrokerRecord, UnfenceBrokerRecord)}


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
