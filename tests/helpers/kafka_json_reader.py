"""An independent reader of Kafka's internal-topic records, written from the JSON definitions.

It interprets field lists transcribed from Kafka's OffsetCommitKey/Value.json,
GroupMetadataKey/Value.json and TransactionLogKey/Value.json and shares no code with protocol/,
so a test that decodes Ketch's bytes with it checks Ketch against Kafka's definitions, not
against itself.
"""

from __future__ import annotations

import struct
from typing import Any

# (name, type, versions, nullableVersions, tag, taggedVersions, sub-fields): transcribed from the JSON.
F = tuple[str, str, str, str | None, int | None, str | None, Any]


def fld(name: str, type_: str, versions: str = "0+", nullable: str | None = None, tag: int | None = None,
        tagged: str | None = None, fields: list[F] | None = None) -> F:
    return (name, type_, versions, nullable, tag, tagged, fields)


DEFS: dict[str, tuple[str | None, list[F]]] = {  # name -> (flexibleVersions, fields)
    "OffsetCommitKey": (None, [fld("group", "string", "0-1"), fld("topic", "string", "0-1"),
                               fld("partition", "int32", "0-1")]),
    "OffsetCommitValue": ("4+", [fld("offset", "int64"), fld("leaderEpoch", "int32", "3+"),
                                 fld("metadata", "string"), fld("commitTimestamp", "int64"),
                                 fld("expireTimestamp", "int64", "1")]),
    "GroupMetadataKey": (None, [fld("group", "string", "2")]),
    "GroupMetadataValue": ("4+", [
        fld("protocolType", "string"), fld("generation", "int32"), fld("protocol", "string", nullable="0+"),
        fld("leader", "string", nullable="0+"), fld("currentStateTimestamp", "int64", "2+"),
        fld("members", "[]", fields=[
            fld("memberId", "string"), fld("groupInstanceId", "string", "3+", nullable="3+"),
            fld("clientId", "string"), fld("clientHost", "string"), fld("rebalanceTimeout", "int32", "1+"),
            fld("sessionTimeout", "int32"), fld("subscription", "bytes"), fld("assignment", "bytes")])]),
    "TransactionLogKey": (None, [fld("TransactionalId", "string", "0")]),
    "TransactionLogValue": ("1+", [
        fld("ProducerId", "int64"), fld("PreviousProducerId", "int64", "none", tag=0, tagged="1+"),
        fld("NextProducerId", "int64", "none", tag=1, tagged="1+"), fld("ProducerEpoch", "int16"),
        fld("TransactionTimeoutMs", "int32"), fld("TransactionStatus", "int8"),
        fld("TransactionPartitions", "[]", nullable="0+", fields=[
            fld("Topic", "string"), fld("PartitionIds", "[]int32")]),
        fld("TransactionLastUpdateTimestampMs", "int64"), fld("TransactionStartTimestampMs", "int64"),
        fld("ClientTransactionVersion", "int16", "none", tag=2, tagged="1+"),
        # KIP-939's addition on Kafka's trunk (the 4.0 JSON stops at tag 2)
        fld("NextProducerEpoch", "int16", "none", tag=3, tagged="1+")]),
}
INTS = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q"}


def _has(spec: str | None, v: int) -> bool:
    if spec is None or spec == "none":
        return False
    if spec.endswith("+"):
        return v >= int(spec[:-1])
    lo, _, hi = spec.partition("-")
    return int(lo) <= v <= int(hi or lo)


class _Buf:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        assert n >= 0 and self.pos + n <= len(self.data), "read past the end"
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value


def _read_type(b: _Buf, type_: str, sub: list[F] | None, v: int, flex: bool, nullable: bool) -> Any:
    if type_ in INTS:
        return struct.unpack(INTS[type_], b.take(struct.calcsize(INTS[type_])))[0]
    if type_ in ("string", "bytes"):
        n = b.uvarint() - 1 if flex else struct.unpack(">h" if type_ == "string" else ">i",
                                                       b.take(2 if type_ == "string" else 4))[0]
        if n < 0:
            assert nullable, "null in a non-nullable field"
            return None
        raw = b.take(n)
        return raw.decode() if type_ == "string" else raw
    assert type_.startswith("[]")
    n = b.uvarint() - 1 if flex else struct.unpack(">i", b.take(4))[0]
    if n < 0:
        assert nullable, "null array in a non-nullable field"
        return None
    if type_ == "[]int32":
        return [struct.unpack(">i", b.take(4))[0] for _ in range(n)]
    assert sub is not None
    return [_read_fields(b, sub, v, flex) for _ in range(n)]


def _read_fields(b: _Buf, fields: list[F], v: int, flex: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, type_, versions, nullable, tag, _tagged, sub in fields:
        if tag is None and _has(versions, v):
            out[name] = _read_type(b, type_, sub, v, flex, _has(nullable, v))
    if flex:
        by_tag = {f[4]: f for f in fields if f[4] is not None and _has(f[5], v)}
        for _ in range(b.uvarint()):
            tag, size = b.uvarint(), b.uvarint()
            end = b.pos + size
            if tag in by_tag:
                name, type_, _, nullable, _, _, sub = by_tag[tag]
                out[name] = _read_type(b, type_, sub, v, flex, _has(nullable, v))
            b.pos = end
    return out


def read_record(name: str, data: bytes) -> tuple[int, dict[str, Any]]:
    flexible, fields = DEFS[name]
    b = _Buf(data)
    version = struct.unpack(">h", b.take(2))[0]
    out = _read_fields(b, fields, version, _has(flexible, version))
    assert b.pos == len(data), f"{len(data) - b.pos} bytes left over"
    return version, out
