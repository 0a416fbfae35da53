"""Kafka's wire types as the schema engine declares fields with them (protocol/schema.py `f`):
fixed-width integers, strings, bytes, record sets, arrays, nested structs.

Apart from protocol/schema.py so that the code generator (protocol/codegen.py), which turns
declarations of these types into source, and the engine that asks it for codecs do not import
each other. Each type can still read and write itself: the generator falls back to that for a
type it does not know.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .primitives import ZERO_UUID, DecodeError, Reader, Writer

# A schema class (protocol/schema.py Struct: a frozen dataclass with `_codec(version, flex)`),
# named loosely: schema.py imports this module, not the other way round.
SchemaClass = type[Any]


class FieldType:
    """A wire type. `read`/`write` receive whether the enclosing version is flexible."""

    name = "?"

    def read(self, r: Reader, flex: bool, version: int) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def write(self, w: Writer, v: Any, flex: bool, version: int) -> None:  # pragma: no cover
        raise NotImplementedError

    def default(self) -> Any:
        return None

    def __repr__(self) -> str:
        return self.name


class _Fixed(FieldType):
    def __init__(self, name: str, rd: Callable[[Reader], Any], wr: Callable[[Writer, Any], None], dflt: Any):
        self.name, self._rd, self._wr, self._dflt = name, rd, wr, dflt

    def read(self, r: Reader, flex: bool, version: int) -> Any:
        return self._rd(r)

    def write(self, w: Writer, v: Any, flex: bool, version: int) -> None:
        self._wr(w, v)

    def default(self) -> Any:
        return self._dflt


INT8 = _Fixed("int8", Reader.int8, Writer.int8, 0)
INT16 = _Fixed("int16", Reader.int16, Writer.int16, 0)
UINT16 = _Fixed("uint16", Reader.uint16, Writer.uint16, 0)
INT32 = _Fixed("int32", Reader.int32, Writer.int32, 0)
UINT32 = _Fixed("uint32", Reader.uint32, Writer.uint32, 0)
INT64 = _Fixed("int64", Reader.int64, Writer.int64, 0)
FLOAT64 = _Fixed("float64", Reader.float64, Writer.float64, 0.0)
BOOL = _Fixed("bool", Reader.boolean, Writer.boolean, False)
UUID = _Fixed("uuid", Reader.uuid, Writer.uuid, ZERO_UUID)  # Kafka's default: the all-zero id


class _String(FieldType):
    name = "string"

    def read(self, r: Reader, flex: bool, version: int) -> Any:
        return r.compact_string() if flex else r.string()

    def write(self, w: Writer, v: Any, flex: bool, version: int) -> None:
        if flex:
            w.compact_string(v)
        else:
            w.string(v)

    def default(self) -> Any:
        return ""


class _Bytes(FieldType):
    name = "bytes"

    def read(self, r: Reader, flex: bool, version: int) -> Any:
        return r.compact_bytes() if flex else r.bytes_()

    def write(self, w: Writer, v: Any, flex: bool, version: int) -> None:
        if flex:
            w.compact_bytes(v)
        else:
            w.bytes_(v)

    def default(self) -> Any:
        return b""


class _Records(_Bytes):
    """Record batches ride as (nullable) bytes; the broker never looks inside on the hot path."""

    name = "records"

    def read(self, r: Reader, flex: bool, version: int) -> Any:
        n = (r.uvarint() - 1) if flex else r.int32()
        if n < 0:
            return None
        return r.view(n)

    def default(self) -> Any:
        return None


STRING = _String()
BYTES = _Bytes()
RECORDS = _Records()


class Array(FieldType):
    def __init__(self, item: FieldType | SchemaClass):
        self.item = item
        self.name = f"[]{item.__name__ if isinstance(item, type) else item.name}"  # a struct's own `name` is a field

    def read(self, r: Reader, flex: bool, version: int) -> Any:
        n = (r.uvarint() - 1) if flex else r.int32()
        if n < 0:
            return None
        if n > r.remaining():
            raise DecodeError(f"array of {n} items cannot fit in {r.remaining()} bytes")
        item = self.item
        if isinstance(item, type):
            rd = item._codec(version, flex)[0]
            return [rd(r) for _ in range(n)]
        return [item.read(r, flex, version) for _ in range(n)]

    def write(self, w: Writer, v: Any, flex: bool, version: int) -> None:
        if v is None:
            if flex:
                w.uvarint(0)
            else:
                w.int32(-1)
            return
        if flex:
            w.uvarint(len(v) + 1)
        else:
            w.int32(len(v))
        item = self.item
        if isinstance(item, type):
            wr = item._codec(version, flex)[1]
            for x in v:
                wr(w, x)
        else:
            for x in v:
                item.write(w, x, flex, version)

    def default(self) -> Any:
        return []


class StructType(FieldType):
    """A single nested struct (not an array of them)."""

    def __init__(self, cls: SchemaClass):
        self.cls = cls
        self.name = cls.__name__

    def read(self, r: Reader, flex: bool, version: int) -> Any:
        return self.cls._codec(version, flex)[0](r)

    def write(self, w: Writer, v: Any, flex: bool, version: int) -> None:
        self.cls._codec(version, flex)[1](w, v)


class NullableStruct(FieldType):
    """A nested struct that may be null: an int8 marker (-1 null, 1 present) before it, as
    Kafka's generated code writes nullable struct fields (DescribeTopicPartitions' Cursor)."""

    def __init__(self, cls: SchemaClass):
        self.cls = cls
        self.name = cls.__name__

    def read(self, r: Reader, flex: bool, version: int) -> Any:
        if r.int8() < 0:
            return None
        return self.cls._codec(version, flex)[0](r)

    def write(self, w: Writer, v: Any, flex: bool, version: int) -> None:
        if v is None:
            w.int8(-1)
            return
        w.int8(1)
        self.cls._codec(version, flex)[1](w, v)

    def default(self) -> Any:
        return None
