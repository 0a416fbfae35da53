"""The schema engine's codec as it was before code generation (main a9d3be6): the reference.

protocol/schema.py now generates the Python source of each (class, version) codec. This module
keeps the old closure-based interpreter, self-contained (it never calls the product's codecs, not
even for nested structs), so tests/unit/test_schema_codegen.py can check that the generated codecs
write exactly the bytes it writes and read back what it reads, for every message and version.
Only the field *declarations* (protocol.schema's FieldType instances and metadata) are shared.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from protocol.primitives import DecodeError, Reader, Writer
from protocol.schema import (
    BOOL,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    UINT16,
    UINT32,
    UUID,
    Array,
    FieldType,
    NullableStruct,
    Struct,
    StructType,
    _Bytes,
    _String,
)

Codec = tuple[Callable[[Reader], Any], Callable[[Writer, Any], None]]

_FIXED: dict[int, tuple[Callable[[Reader], Any], Callable[[Writer, Any], None]]] = {
    id(INT8): (Reader.int8, Writer.int8),
    id(INT16): (Reader.int16, Writer.int16),
    id(UINT16): (Reader.uint16, Writer.uint16),
    id(INT32): (Reader.int32, Writer.int32),
    id(UINT32): (Reader.uint32, Writer.uint32),
    id(INT64): (Reader.int64, Writer.int64),
    id(FLOAT64): (Reader.float64, Writer.float64),
    id(BOOL): (Reader.boolean, Writer.boolean),
    id(UUID): (Reader.uuid, Writer.uuid),
}

_CACHE: dict[tuple[type, int, bool, bool], Codec] = {}


def codec(cls: type[Struct], version: int, flex: bool) -> Codec:
    """The old (read, write) pair of `cls` at `version`; cached per class, version and null rule."""
    key = (cls, version, flex, bool(cls.__dict__.get("_refuse_nulls")))
    c = _CACHE.get(key)
    if c is None:
        c = _CACHE[key] = _compile(cls, version, flex)
    return c


def _read(ft: FieldType, r: Reader, flex: bool, version: int) -> Any:
    fixed = _FIXED.get(id(ft))
    if fixed is not None:
        return fixed[0](r)
    if ft is RECORDS:
        n = (r.uvarint() - 1) if flex else r.int32()
        if n < 0:
            return None
        return r.view(n)
    if isinstance(ft, _String):
        return r.compact_string() if flex else r.string()
    if isinstance(ft, _Bytes):
        return r.compact_bytes() if flex else r.bytes_()
    if isinstance(ft, Array):
        n = (r.uvarint() - 1) if flex else r.int32()
        if n < 0:
            return None
        if n > r.remaining():
            raise DecodeError(f"array of {n} items cannot fit in {r.remaining()} bytes")
        item = ft.item
        if isinstance(item, type):
            rd = codec(item, version, flex)[0]
            return [rd(r) for _ in range(n)]
        return [_read(item, r, flex, version) for _ in range(n)]
    if isinstance(ft, StructType):
        return codec(ft.cls, version, flex)[0](r)
    if isinstance(ft, NullableStruct):
        if r.int8() < 0:
            return None
        return codec(ft.cls, version, flex)[0](r)
    return ft.read(r, flex, version)


def _write(ft: FieldType, w: Writer, v: Any, flex: bool, version: int) -> None:
    fixed = _FIXED.get(id(ft))
    if fixed is not None:
        fixed[1](w, v)
    elif isinstance(ft, _String):
        if flex:
            w.compact_string(v)
        else:
            w.string(v)
    elif isinstance(ft, _Bytes):
        if flex:
            w.compact_bytes(v)
        else:
            w.bytes_(v)
    elif isinstance(ft, Array):
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
        item = ft.item
        if isinstance(item, type):
            wr = codec(item, version, flex)[1]
            for x in v:
                wr(w, x)
        else:
            for x in v:
                _write(item, w, x, flex, version)
    elif isinstance(ft, StructType):
        codec(ft.cls, version, flex)[1](w, v)
    elif isinstance(ft, NullableStruct):
        if v is None:
            w.int8(-1)
            return
        w.int8(1)
        codec(ft.cls, version, flex)[1](w, v)
    else:
        ft.write(w, v, flex, version)


def _in(rng: tuple[int, int] | None, v: int) -> bool:
    return rng is not None and rng[0] <= v <= rng[1]


def _compile(cls: type[Struct], version: int, flex: bool) -> Codec:
    plain: list[tuple[str, FieldType]] = []
    tagged: dict[int, tuple[str, FieldType]] = {}
    for fl in dataclasses.fields(cls):  # type: ignore[arg-type]
        m = fl.metadata
        if "ktype" not in m:
            continue
        if m["tag"] is not None:
            if flex and _in(m["tagged"] or m["versions"], version):
                tagged[m["tag"]] = (fl.name, m["ktype"])
        elif _in(m["versions"], version):
            plain.append((fl.name, m["ktype"]))
    defaults = {fl.name: fl for fl in dataclasses.fields(cls)}  # type: ignore[arg-type]
    tag_defaults: dict[str, Any] = {}
    for _tag, (name, _ft) in tagged.items():
        fl = defaults[name]
        if fl.default is not dataclasses.MISSING:
            tag_defaults[name] = fl.default
        elif fl.default_factory is not dataclasses.MISSING:
            tag_defaults[name] = fl.default_factory()

    strict = bool(cls.__dict__.get("_refuse_nulls"))
    never_null = [name for name, ft in plain if strict
                  and isinstance(ft, _String | _Bytes | Array) and "None" not in str(defaults[name].type)]
    null_free_items = {name for name, ft in plain if isinstance(ft, Array) and isinstance(ft.item, _String | _Bytes)}

    def read(r: Reader) -> Any:
        kw = {name: _read(ft, r, flex, version) for name, ft in plain}
        for name in never_null:
            v = kw[name]
            if v is None:
                raise DecodeError(f"non-nullable field {cls.__name__}.{name} was serialized as null")
            if name in null_free_items and None in v:
                raise DecodeError(f"an element of {cls.__name__}.{name} was serialized as null")
        if flex:
            for _ in range(r.uvarint()):
                tag = r.uvarint()
                size = r.uvarint()
                if tag in tagged:
                    name, ft = tagged[tag]
                    sub = Reader(r.buf, r.pos, r.pos + size)
                    if sub.end > r.end:
                        raise DecodeError("tagged field past end")
                    kw[name] = _read(ft, sub, True, version)
                r.pos += size
                if r.pos > r.end:
                    raise DecodeError("tagged field past end")
        return cls(**kw)

    tag_order = sorted(tagged.items())

    def write(w: Writer, obj: Any) -> None:
        for name, ft in plain:
            _write(ft, w, getattr(obj, name), flex, version)
        if flex:
            present = [(t, n, ft) for t, (n, ft) in tag_order if getattr(obj, n) != tag_defaults[n]]
            w.uvarint(len(present))
            for t, n, ft in present:
                sub = Writer()
                _write(ft, sub, getattr(obj, n), True, version)
                w.uvarint(t)
                w.uvarint(len(sub.buf))
                w.raw(sub.buf)

    return read, write


def encode(msg: Any, version: int) -> bytes:
    """The old engine's bytes for a message (a Message subclass instance) at `version`."""
    w = Writer()
    codec(type(msg), version, msg.is_flexible(version))[1](w, msg)
    return w.getvalue()


def decode(cls: Any, buf: bytes, version: int) -> Any:
    return codec(cls, version, cls.is_flexible(version))[0](Reader(buf))
