"""The declarative schema engine: one dataclass per message, field metadata drives the codec.

A message or nested struct is a frozen, slotted dataclass whose fields are declared with
`f(type, versions, ...)`. Version ranges are written the way Kafka's message definitions write
them ("3+", "0-2", "none"). From that single declaration we derive, lazily and once per
(class, version), the source of a specialised reader and writer (protocol/codegen.py), so the
per-request cost is straight-line code with no schema interpretation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, dataclass_transform

from .field_types import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    Array,
    FieldType,
    NullableStruct,
    StructType,
    _Bytes,
    _Fixed,
    _Records,
    _String,
)
from .primitives import Reader, Writer

# The field types are declared in field_types.py and re-exported: every message module
# declares its fields through this module.
__all__ = [
    "Array",
    "BOOL",
    "BYTES",
    "FLOAT64",
    "FieldType",
    "INT16",
    "INT32",
    "INT64",
    "INT8",
    "MAX_VERSION",
    "Message",
    "NullableStruct",
    "RECORDS",
    "ReadAt",
    "STRING",
    "Struct",
    "StructType",
    "UINT16",
    "UINT32",
    "UUID",
    "WriteTo",
    "f",
    "parse_versions",
    "refuse_nulls",
    "schema",
    "source",
    "_Bytes",
    "_Fixed",
    "_Records",
    "_String",
]

MAX_VERSION = 0x7FFF

T = TypeVar("T", bound="Struct")
ReadAt = Callable[[memoryview, int, int], tuple[Any, int]]
WriteTo = Callable[[bytearray, Any], None]


def parse_versions(spec: str) -> tuple[int, int] | None:
    """'3+' -> (3, MAX); '0-2' -> (0, 2); '5' -> (5, 5); 'none' -> None."""
    spec = spec.strip()
    if spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), MAX_VERSION
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo), int(hi)
    v = int(spec)
    return v, v


def f(
    type_: FieldType | type[Struct],
    versions: str = "0+",
    *,
    default: Any = dataclasses.MISSING,
    tag: int | None = None,
    tagged: str | None = None,
) -> Any:
    """Declare a schema field: wire type, the versions it exists in, optional tag."""
    ftype: FieldType = StructType(type_) if isinstance(type_, type) else type_
    meta = {"ktype": ftype, "versions": parse_versions(versions), "tag": tag,
            "tagged": parse_versions(tagged) if tagged else None}
    if default is not dataclasses.MISSING:
        if isinstance(default, list):
            return dataclasses.field(default_factory=list, metadata=meta)
        return dataclasses.field(default=default, metadata=meta)
    if isinstance(ftype, Array):
        return dataclasses.field(default_factory=list, metadata=meta)
    if isinstance(ftype, StructType):
        return dataclasses.field(default_factory=ftype.cls, metadata=meta)
    return dataclasses.field(default=ftype.default(), metadata=meta)


class Struct:
    """Base of every schema class; subclasses are made dataclasses by `@schema`."""

    __slots__ = ()
    _codecs: ClassVar[dict[tuple[int, bool], tuple[Callable[[Reader], Any], Callable[[Writer, Any], None]]]]
    _raw_codecs: ClassVar[dict[tuple[int, bool], tuple[ReadAt, WriteTo]]]

    @classmethod
    def _codec(cls, version: int, flex: bool) -> tuple[Callable[[Reader], Any], Callable[[Writer, Any], None]]:
        """(read(reader) -> obj, write(writer, obj)) at `version`: generated once, then cached."""
        key = (version, flex)
        c = cls.__dict__["_codecs"].get(key)
        if c is None:
            read_at, write_to = cls._raw(version, flex)

            def read(r: Reader) -> Any:
                obj, r.pos = read_at(r.buf, r.pos, r.end)
                return obj

            def write(w: Writer, obj: Any) -> None:
                write_to(w.buf, obj)

            c = cls.__dict__["_codecs"][key] = (read, write)
        return c

    @classmethod
    def _raw(cls, version: int, flex: bool) -> tuple[ReadAt, WriteTo]:
        """The generated functions themselves (protocol/codegen.py): read_at(buf, pos, end) ->
        (obj, pos) and write_to(bytearray, obj)."""
        key = (version, flex)
        c = cls.__dict__["_raw_codecs"].get(key)
        if c is None:
            c = cls.__dict__["_raw_codecs"][key] = _generate(cls, version, flex)
        return c


# every class with generated codecs, so that refuse_nulls can drop them all
_GENERATED: set[type[Struct]] = set()


def _generate(cls: type[Struct], version: int, flex: bool) -> tuple[ReadAt, WriteTo]:
    """Generate and compile. A struct can only contain structs declared before it, so the nested
    codecs this asks for (at the same version) never lead back to `cls`."""
    from .codegen import compile_codec  # the generator imports this module's field types

    c = compile_codec(cls, version, flex, lambda sub: sub._raw(version, flex))
    _GENERATED.add(cls)
    return c


def source(cls: type[Struct], version: int, flex: bool | None = None) -> str:
    """The generated Python of `cls`'s codec at `version` (a Message knows whether that version is
    flexible; for a nested struct say so): for reading, debugging and profiles."""
    from .codegen import generate

    if flex is None:
        flex = bool(getattr(cls, "is_flexible", lambda v: False)(version))
    return generate(cls, version, flex, lambda sub: sub._raw(version, flex))[0]


def refuse_nulls(cls: type[Struct]) -> None:
    """Decode `cls` (a request) and the structs inside it as Kafka does: a null in a string, bytes
    or array field that may not be null (no `| None` in its annotation, which is Kafka's
    nullableVersions: tests/unit/test_fuzz_found.py holds the two together) is a DecodeError, not
    a None for the handler to trip on; nor may an array's strings be null. Only requests: what a
    broker reads off the wire from anyone."""
    type.__setattr__(cls, "_refuse_nulls", True)
    # generated codecs bind the codecs of the structs inside them: regenerate them all
    for done in _GENERATED:
        done.__dict__["_codecs"].clear()
        done.__dict__["_raw_codecs"].clear()
    _GENERATED.clear()
    _MESSAGE_CODECS.clear()
    for fl in dataclasses.fields(cls):  # type: ignore[arg-type]
        ft = fl.metadata.get("ktype")
        sub = ft.item if isinstance(ft, Array) else getattr(ft, "cls", None)
        if isinstance(sub, type) and not sub.__dict__.get("_refuse_nulls"):
            refuse_nulls(sub)


# Tells type checkers that decorated classes are (frozen) dataclasses, so that constructor calls with
# keyword fields type-check. No field_specifiers on purpose: `f(...)` always supplies a default, and
# declaring it a specifier would make every field without an explicit `default=` look required.
@dataclass_transform(frozen_default=True)
def schema(cls: type[T]) -> type[T]:
    """Turn a Struct subclass into a frozen slotted dataclass with a codec cache."""
    dc = dataclasses.dataclass(frozen=True, slots=True)(cls)
    type.__setattr__(dc, "_codecs", {})
    type.__setattr__(dc, "_raw_codecs", {})
    return dc


class Message(Struct):
    """A top-level request or response body."""

    __slots__ = ()
    API_KEY: ClassVar[int]
    VERSIONS: ClassVar[tuple[int, int]]
    FLEXIBLE: ClassVar[int | None]  # first flexible version, None if never

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return cls.FLEXIBLE is not None and version >= cls.FLEXIBLE

    @classmethod
    def read(cls: type[T], r: Reader, version: int) -> T:
        c = _MESSAGE_CODECS.get((cls, version)) or _message_codec(cls, version)  # type: ignore[arg-type]
        obj, r.pos = c[0](r.buf, r.pos, r.end)
        return obj  # type: ignore[no-any-return]

    def write(self, w: Writer, version: int) -> None:
        (_MESSAGE_CODECS.get((type(self), version)) or _message_codec(type(self), version))[1](w.buf, self)

    def write_to(self, b: bytearray, version: int) -> None:
        """Append the encoding at `version` to `b` (framing writes header and body into one buffer)."""
        (_MESSAGE_CODECS.get((type(self), version)) or _message_codec(type(self), version))[1](b, self)

    @classmethod
    def decode(cls: type[T], buf: bytes | memoryview, version: int) -> T:
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        c = _MESSAGE_CODECS.get((cls, version)) or _message_codec(cls, version)  # type: ignore[arg-type]
        return c[0](mv, 0, len(mv))[0]  # type: ignore[no-any-return]

    def encode(self, version: int) -> bytes:
        b = bytearray()
        (_MESSAGE_CODECS.get((type(self), version)) or _message_codec(type(self), version))[1](b, self)
        return bytes(b)


# (message class, version) -> its generated functions: what read/write/decode/encode look up
_MESSAGE_CODECS: dict[tuple[type[Message], int], tuple[ReadAt, WriteTo]] = {}


def _message_codec(cls: type[Message], version: int) -> tuple[ReadAt, WriteTo]:
    c = _MESSAGE_CODECS[(cls, version)] = cls._raw(version, cls.is_flexible(version))
    return c
