"""The schema engine's code generator: Python source for one (struct class, version) codec.

The engine's first codec was a loop over per-field closures: a method call per integer, a dict
of keyword arguments and a dataclass `__init__` per struct. Profiles showed it as the largest
single CPU cost of the broker (a sixth of a simulated cluster's). Here, once per (class, version,
flexible) and lazily, the field declarations become the source of two straight-line functions:

    read_at(buf, pos, end) -> (obj, pos)   buf a memoryview, end the bound of this struct's bytes
    write_to(b, obj)                       b the output bytearray

compiled with `exec` in a namespace of pre-bound helpers (protocol.schema wraps them in the
Reader/Writer signatures it has always had). What makes them fast:

- consecutive fixed-width fields (ints, bools, floats, UUIDs) are one precompiled
  `struct.Struct` unpack/pack, bounds-checked once;
- the read position lives in a local; varints, strings, bytes and array counts are read inline
  (a helper only for multi-byte varints);
- the object is made with `object.__new__` and each slot's descriptor, every field set (absent
  ones to their dataclass default, factories called per object), which is what the frozen
  dataclass `__init__` does at half the cost;
- nested structs call each other's generated functions directly, bound at compile time.

Every malformed input still raises protocol.primitives.DecodeError where the old engine did (a
run's bounds are checked before any of it is read, so a short run fails the same way one field
at a time would); tests/unit/test_schema_codegen.py compares bytes and decoded values with the
old engine, kept in tests/helpers/schema_reference.py, for every message and version.
`source(cls, version)` returns the generated code for reading.
"""

from __future__ import annotations

import dataclasses
import linecache
import math
import struct
import types
import uuid
from collections.abc import Callable
from typing import Any

from .field_types import (
    BOOL,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    UINT16,
    UINT32,
    UUID,
    Array,
    FieldType,
    NullableStruct,
    SchemaClass,
    StructType,
    _Bytes,
    _Records,
    _String,
)
from .primitives import (
    SPLICE_MIN,
    ZERO_UUID,
    DecodeError,
    Reader,
    Spliced,
    Writer,
    encode_uvarint,
    uvarint_at,
)

ReadAt = Callable[[memoryview, int, int], tuple[Any, int]]
WriteTo = Callable[[bytearray, Any], None]

# wire type -> (struct format code, size); UUID is 16 raw bytes made into a uuid.UUID after
_FIXED: dict[int, tuple[str, int]] = {
    id(INT8): ("b", 1), id(INT16): ("h", 2), id(UINT16): ("H", 2), id(INT32): ("i", 4),
    id(UINT32): ("I", 4), id(INT64): ("q", 8), id(FLOAT64): ("d", 8), id(BOOL): ("?", 1),
    id(UUID): ("16s", 16),
}
_STRUCTS: dict[str, struct.Struct] = {}  # by format, shared by every generated codec
_CODE_NAMES = {"?": "o", "16s": "U"}  # for readable names of structs: '?' is no identifier
# literals safe to write into the source as their repr
_LITERAL_TYPES = (int, float, str, bytes, bool, type(None))


def _fixed(ft: Any) -> tuple[str, int] | None:
    return _FIXED.get(id(ft))


# ---------------------------------------------------------------------------------------------
# helpers the generated code calls (bound into its namespace)

def _need(n: int, pos: int, end: int) -> DecodeError:
    return DecodeError(f"need {n} bytes at {pos}, have {end - pos}")


_uvarint = uvarint_at  # the generated code calls it by this name


def _skip_tags(buf: memoryview, pos: int, end: int) -> int:
    """Past a tagged-field section none of whose tags the struct knows (as the old engine read it)."""
    count, pos = _uvarint(buf, pos, end)
    for _ in range(count):
        _tag, pos = _uvarint(buf, pos, end)
        size, pos = _uvarint(buf, pos, end)
        pos += size
        if pos > end:
            raise DecodeError("tagged field past end")
    return pos


_new = object.__new__
_set = object.__setattr__
_UNKNOWN = uuid.SafeUUID.unknown


def _uuid(raw: bytes) -> uuid.UUID:
    """uuid.UUID(bytes=raw) without its argument parsing (a third of a small struct's decode)."""
    u = _new(uuid.UUID)
    _set(u, "int", int.from_bytes(raw, "big"))
    _set(u, "is_safe", _UNKNOWN)
    return u


def _array_structs(code: str) -> Callable[[int], struct.Struct]:
    """A cache of `struct.Struct(">{n}{code}")` by n: arrays of ints in one call."""
    cache: dict[int, struct.Struct] = {}

    def get(n: int) -> struct.Struct:
        s = cache.get(n)
        if s is None:
            s = struct.Struct(f">{n}{code}")
            if n <= 256:  # counts seen are small; a huge one from garbage input is not kept
                cache[n] = s
        return s

    return get


_ARRAYS = {code: _array_structs(code) for code in ("b", "h", "H", "i", "I", "q", "d")}


def _writer_over(b: bytearray) -> Writer:
    """A Writer appending to `b`, for a FieldType the generator does not know."""
    w = Writer.__new__(Writer)
    w.buf = b
    return w


_BASE_NAMESPACE: dict[str, Any] = {
    "DecodeError": DecodeError, "Reader": Reader, "_need": _need, "_uvarint": _uvarint, "_uv": encode_uvarint,
    "_skip_tags": _skip_tags,
    "_uuid": _uuid, "_new": _new, "_ZERO_UUID": ZERO_UUID,
    **{f"_array_{code}": get for code, get in _ARRAYS.items()},
}


# ---------------------------------------------------------------------------------------------
# the generator

def _in(rng: tuple[int, int] | None, v: int) -> bool:
    return rng is not None and rng[0] <= v <= rng[1]


@dataclasses.dataclass
class _Layout:
    """Which fields of a class are on the wire at one version, and how."""

    plain: list[tuple[str, FieldType]]
    tagged: list[tuple[int, str, FieldType]]  # sorted by tag
    never_null: list[str]  # refuse_nulls: fields whose null is a DecodeError, in field order
    null_free_items: set[str]  # ... and whose array elements may not be null either


def _layout(cls: SchemaClass, version: int, flex: bool) -> _Layout:
    plain: list[tuple[str, FieldType]] = []
    tagged: dict[int, tuple[str, FieldType]] = {}
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    for fl in fields:
        m = fl.metadata
        if "ktype" not in m:
            continue
        if m["tag"] is not None:
            if flex and _in(m["tagged"] or m["versions"], version):
                tagged[m["tag"]] = (fl.name, m["ktype"])
        elif _in(m["versions"], version):
            plain.append((fl.name, m["ktype"]))
    types_ = {fl.name: fl.type for fl in fields}
    strict = bool(cls.__dict__.get("_refuse_nulls"))
    # Kafka's decoders refuse a null where the field is not nullable; so do requests' (see refuse_nulls)
    never_null = [name for name, ft in plain if strict
                  and isinstance(ft, _String | _Bytes | Array) and "None" not in str(types_[name])]
    null_free = {name for name, ft in plain if isinstance(ft, Array) and isinstance(ft.item, _String | _Bytes)}
    return _Layout(plain, [(t, n, ft) for t, (n, ft) in sorted(tagged.items())], never_null, null_free)


class _Source:
    """Lines of code with indentation, and the namespace of the objects the code names."""

    def __init__(self, ns: dict[str, Any]) -> None:
        self.lines: list[str] = []
        self.ns = ns
        self._names: dict[int, str] = {}
        self._count = 0

    def emit(self, ind: int, line: str) -> None:
        self.lines.append("    " * ind + line)

    def bind(self, obj: Any, hint: str) -> str:
        """A name for `obj` in the namespace (the same name for the same object)."""
        name = self._names.get(id(obj))
        if name is None:
            name = hint
            k = 1
            while name in self.ns and self.ns[name] is not obj:
                k += 1
                name = f"{hint}_{k}"
            self.ns[name] = obj
            self._names[id(obj)] = name
        return name

    def const(self, obj: Any, hint: str) -> str:
        """An expression for a constant: its literal when it has one, else a bound name."""
        if type(obj) in _LITERAL_TYPES and (type(obj) is not float or math.isfinite(obj)):
            return repr(obj)
        return self.bind(obj, hint)

    def tmp(self, hint: str) -> str:
        self._count += 1
        return f"{hint}{self._count}"


Resolver = Callable[[SchemaClass], tuple[ReadAt, WriteTo]]


def _default_expr(src: _Source, fl: dataclasses.Field[Any]) -> str:
    """An expression for a field's dataclass default: a fresh object per evaluation for a factory."""
    if fl.default is not dataclasses.MISSING:
        return src.const(fl.default, f"_default_{fl.name}")
    factory = fl.default_factory
    if factory is dataclasses.MISSING:
        raise TypeError(f"{fl.name} has no default")  # @schema fields always have one
    if factory is list:
        return "[]"
    if isinstance(factory, type) and _is_struct(factory):
        return src.bind(new_default(factory), f"_new_{fl.name}") + "()"
    return src.bind(factory, f"_new_{fl.name}") + "()"


def _is_struct(t: object) -> bool:
    """A schema class (protocol/schema.py Struct), told by its codec cache: this module does not
    import schema.py, which imports it."""
    return isinstance(t, type) and hasattr(t, "_raw")


_MAKERS: dict[SchemaClass, Callable[[], Any]] = {}


def new_default(cls: SchemaClass) -> Callable[[], Any]:
    """A function returning `cls()`, made the way the generated readers make objects: a nested
    struct that a version does not carry (or a tagged one not sent) costs this per object."""
    maker = _MAKERS.get(cls)
    if maker is None:
        fields = {fl.name: fl for fl in dataclasses.fields(cls)}  # type: ignore[arg-type]
        setters = _slot_setters(cls, fields)
        if setters is None:
            maker = cls
        else:
            src = _Source({"_new": _new})
            src.emit(0, "def new():")
            src.emit(1, f"o = _new({src.bind(cls, cls.__name__)})")
            for name, fl in fields.items():
                src.emit(1, f"{src.bind(setters[name], f'_set_{name}')}(o, {_default_expr(src, fl)})")
            src.emit(1, "return o")
            text = "\n".join(src.lines) + "\n"
            exec(compile(text, f"<default {cls.__module__}.{cls.__qualname__}>", "exec"), src.ns)  # noqa: S102
            maker = src.ns["new"]
        _MAKERS[cls] = maker
    return maker


class _Gen:
    def __init__(self, cls: SchemaClass, version: int, flex: bool, resolve: Resolver) -> None:
        self.cls, self.version, self.flex, self.resolve = cls, version, flex, resolve
        self.src = _Source(dict(_BASE_NAMESPACE))
        self.lay = _layout(cls, version, flex)

    # -- names of things the code calls ---------------------------------------------------------
    def struct_fmt(self, codes: list[str]) -> str:
        """The name of a precompiled big-endian struct of these codes: `_s_iqh` for '>iqh'."""
        fmt = ">" + "".join(codes)
        s = _STRUCTS.get(fmt)
        if s is None:
            s = _STRUCTS[fmt] = struct.Struct(fmt)
        return self.src.bind(s, "_s_" + "".join(_CODE_NAMES.get(c, c) for c in codes))

    def reader_of(self, cls: SchemaClass) -> str:
        return self.src.bind(self.resolve(cls)[0], f"read_{cls.__name__}")

    def writer_of(self, cls: SchemaClass) -> str:
        return self.src.bind(self.resolve(cls)[1], f"write_{cls.__name__}")

    def fallback(self, ft: FieldType) -> str:
        return self.src.bind(ft, f"_type_{type(ft).__name__.strip('_').lower()}")

    # -- reading ----------------------------------------------------------------------------------
    def r_uvarint(self, ind: int, target: str, p: str, e: str) -> None:
        """target = an unsigned varint (the one-byte case inline)."""
        emit = self.src.emit
        emit(ind, f"if {p} >= {e}: raise DecodeError('truncated varint')")
        emit(ind, f"{target} = buf[{p}]")
        emit(ind, f"if {target} > 127: {target}, {p} = _uvarint(buf, {p}, {e})")
        emit(ind, f"else: {p} += 1")

    def r_count(self, ind: int, target: str, p: str, e: str, classic: str) -> None:
        """target = a length or count: compact (uvarint - 1) when flexible, else `classic` ('h'/'i')."""
        if self.flex:
            self.r_uvarint(ind, target, p, e)
            self.src.emit(ind, f"{target} -= 1")
        else:
            size = 2 if classic == "h" else 4
            self.r_run(ind, [(target, classic)], p, e, size)

    def r_run(self, ind: int, items: list[tuple[str, str]], p: str, e: str, size: int) -> None:
        """Targets = one unpack of consecutive fixed-width values (format codes), bounds checked once."""
        emit = self.src.emit
        fmt = self.struct_fmt([c for _, c in items])
        emit(ind, f"if {p} + {size} > {e}: raise _need({size}, {p}, {e})")
        if len(items) == 1:
            emit(ind, f"{items[0][0]} = {fmt}.unpack_from(buf, {p})[0]")
        else:
            emit(ind, f"{', '.join(t for t, _ in items)} = {fmt}.unpack_from(buf, {p})")
        emit(ind, f"{p} += {size}")
        for t, c in items:
            if c == "16s":
                emit(ind, f"{t} = _uuid({t})")

    def r_value(self, ind: int, ft: FieldType, target: str, p: str, e: str) -> None:
        """Code that reads one value of `ft` at position variable `p` (bound `e`) into `target`."""
        emit, tmp = self.src.emit, self.src.tmp
        fixed = _fixed(ft)
        if fixed is not None:
            self.r_run(ind, [(target, fixed[0])], p, e, fixed[1])
        elif type(ft) in (_String, _Bytes, _Records):
            n = tmp("n")
            self.r_count(ind, n, p, e, "h" if type(ft) is _String else "i")
            emit(ind, f"if {n} < 0:")
            emit(ind + 1, f"{target} = None")
            emit(ind, "else:")
            emit(ind + 1, f"if {p} + {n} > {e}: raise _need({n}, {p}, {e})")
            piece = f"buf[{p}:{p} + {n}]"
            value = {_String: f"{piece}.tobytes().decode()", _Bytes: f"{piece}.tobytes()", _Records: piece}[type(ft)]
            emit(ind + 1, f"{target} = {value}")
            emit(ind + 1, f"{p} += {n}")
        elif type(ft) is Array:
            self.r_array(ind, ft, target, p, e)
        elif type(ft) is StructType:
            emit(ind, f"{target}, {p} = {self.reader_of(ft.cls)}(buf, {p}, {e})")
        elif type(ft) is NullableStruct:
            emit(ind, f"if {p} >= {e}: raise _need(1, {p}, {e})")
            emit(ind, f"if buf[{p}] > 127:  # int8 marker: negative is null")
            emit(ind + 1, f"{target} = None")
            emit(ind + 1, f"{p} += 1")
            emit(ind, "else:")
            emit(ind + 1, f"{target}, {p} = {self.reader_of(ft.cls)}(buf, {p} + 1, {e})")
        else:  # a FieldType of another module: its own read, over a Reader
            r = tmp("r")
            emit(ind, f"{r} = Reader(buf, {p}, {e})")
            emit(ind, f"{target} = {self.fallback(ft)}.read({r}, {self.flex}, {self.version})")
            emit(ind, f"{p} = {r}.pos")

    def r_array(self, ind: int, ft: Array, target: str, p: str, e: str) -> None:
        emit, tmp = self.src.emit, self.src.tmp
        n = tmp("n")
        self.r_count(ind, n, p, e, "i")
        emit(ind, f"if {n} < 0:")
        emit(ind + 1, f"{target} = None")
        emit(ind, "else:")
        ind += 1
        emit(ind, f"if {n} > {e} - {p}:")
        emit(ind + 1, f"raise DecodeError(f'array of {{{n}}} items cannot fit in {{{e} - {p}}} bytes')")
        item = ft.item
        fixed = None if isinstance(item, type) else _fixed(item)
        if isinstance(item, type):
            x = tmp("x")
            emit(ind, f"{target} = []")
            emit(ind, f"for _ in range({n}):")
            emit(ind + 1, f"{x}, {p} = {self.reader_of(item)}(buf, {p}, {e})")
            emit(ind + 1, f"{target}.append({x})")
        elif fixed is not None and fixed[0] in _ARRAYS:
            size = f"{fixed[1]} * {n}" if fixed[1] > 1 else n
            emit(ind, f"if {p} + {size} > {e}: raise _need({size}, {p}, {e})")
            emit(ind, f"{target} = list(_array_{fixed[0]}({n}).unpack_from(buf, {p}))")
            emit(ind, f"{p} += {size}")
        else:
            x = tmp("x")
            emit(ind, f"{target} = []")
            emit(ind, f"for _ in range({n}):")
            self.r_value(ind + 1, item, x, p, e)
            emit(ind + 1, f"{target}.append({x})")

    def default_expr(self, fl: dataclasses.Field[Any]) -> str:
        return _default_expr(self.src, fl)

    def reader(self) -> None:
        cls, lay = self.cls, self.lay
        emit = self.src.emit
        emit(0, "def read_at(buf, pos, end):")
        run: list[tuple[str, str]] = []
        size = 0

        def flush() -> None:
            nonlocal run, size
            if run:
                emit(1, f"# {', '.join(t[2:] for t, _ in run)}")
                self.r_run(1, run, "pos", "end", size)
                run, size = [], 0

        for name, ft in lay.plain:
            fixed = _fixed(ft)
            if fixed is not None:
                run.append((f"f_{name}", fixed[0]))
                size += fixed[1]
                continue
            flush()
            emit(1, f"# {name}: {ft!r}")
            self.r_value(1, ft, f"f_{name}", "pos", "end")
        flush()
        for name in lay.never_null:
            emit(1, f"if f_{name} is None: raise DecodeError("
                    f"'non-nullable field {cls.__name__}.{name} was serialized as null')")
            if name in lay.null_free_items:
                emit(1, f"if None in f_{name}: raise DecodeError("
                        f"'an element of {cls.__name__}.{name} was serialized as null')")
        fields = {fl.name: fl for fl in dataclasses.fields(cls)}  # type: ignore[arg-type]
        if self.flex:
            if not lay.tagged:
                emit(1, "# tagged fields: none known, any skipped")
                emit(1, "if pos < end and buf[pos] == 0: pos += 1")
                emit(1, "else: pos = _skip_tags(buf, pos, end)")
                self.construct(fields)
                return
            emit(1, "# tagged fields")
            for _tag, name, _ft in lay.tagged:
                emit(1, f"f_{name} = {self.default_expr(fields[name])}")
            emit(1, "if pos >= end: raise DecodeError('truncated varint')")
            emit(1, "tags = buf[pos]")
            emit(1, "pos += 1")
            emit(1, "if tags:  # mostly none")
            emit(2, "if tags > 127: tags, pos = _uvarint(buf, pos - 1, end)")
            emit(2, "for _ in range(tags):")
            emit(3, "tag, pos = _uvarint(buf, pos, end)")
            emit(3, "size, pos = _uvarint(buf, pos, end)")
            emit(3, "tend = pos + size")
            for i, (tag, name, ft) in enumerate(lay.tagged):
                emit(3, f"{'if' if i == 0 else 'elif'} tag == {tag}:")
                emit(4, "if tend > end: raise DecodeError('tagged field past end')")
                emit(4, "tpos = pos")
                self.r_value(4, ft, f"f_{name}", "tpos", "tend")
            emit(3, "pos = tend")
            emit(3, "if pos > end: raise DecodeError('tagged field past end')")
        self.construct(fields)

    def construct(self, fields: dict[str, dataclasses.Field[Any]]) -> None:
        """return obj, pos: every field set, the ones not on the wire to their defaults."""
        emit, cls = self.src.emit, self.cls
        on_wire = {n for n, _ in self.lay.plain} | {n for _, n, _ in self.lay.tagged}
        values = {name: (f"f_{name}" if name in on_wire else self.default_expr(fl)) for name, fl in fields.items()}
        setters = _slot_setters(cls, fields)
        if setters is None:  # not a plain frozen slotted dataclass: its own __init__
            args = ", ".join(f"{n}={v}" for n, v in values.items() if fields[n].init)
            emit(1, f"return {self.src.bind(cls, cls.__name__)}({args}), pos")
            return
        emit(1, f"o = _new({self.src.bind(cls, cls.__name__)})")
        for name, value in values.items():
            emit(1, f"{self.src.bind(setters[name], f'_set_{name}')}(o, {value})")
        emit(1, "return o, pos")

    # -- writing ----------------------------------------------------------------------------------
    def w_uvarint(self, ind: int, b: str, expr: str) -> None:
        n = self.src.tmp("u")
        self.src.emit(ind, f"{n} = {expr}")
        self.src.emit(ind, f"if {n} < 128: {b}.append({n})")
        self.src.emit(ind, f"else: {b} += _uv({n})")

    def w_count(self, ind: int, b: str, expr: str, classic: str) -> None:
        """A length or count: compact (uvarint + 1) when flexible, else int16/int32."""
        if self.flex:
            self.w_uvarint(ind, b, f"{expr} + 1")
        else:
            self.src.emit(ind, f"{b} += {self.struct_fmt([classic])}.pack({expr})")

    def w_null(self, ind: int, b: str, classic: str) -> None:
        if self.flex:
            self.src.emit(ind, f"{b}.append(0)")
        else:
            minus_one = b"\xff" * (2 if classic == "h" else 4)
            self.src.emit(ind, f"{b} += {minus_one!r}")

    def w_value(self, ind: int, ft: FieldType, expr: str, b: str) -> None:
        """Code that appends `expr` (a name: it is evaluated more than once) as `ft` to `b`."""
        emit, tmp = self.src.emit, self.src.tmp
        fixed = _fixed(ft)
        if fixed is not None:
            arg = f"({expr} or _ZERO_UUID).bytes" if fixed[0] == "16s" else expr
            emit(ind, f"{b} += {self.struct_fmt([fixed[0]])}.pack({arg})")
        elif type(ft) in (_String, _Bytes, _Records):
            classic = "h" if type(ft) is _String else "i"
            emit(ind, f"if {expr} is None:")
            self.w_null(ind + 1, b, classic)
            emit(ind, "else:")
            data = expr
            if type(ft) is _String:
                data = tmp("e")
                emit(ind + 1, f"{data} = {expr}.encode()")
            self.w_count(ind + 1, b, f"len({data})", classic)
            if type(ft) is _Records:  # a fetch's batches: referred to, not copied (primitives.Spliced)
                emit(ind + 1, f"if len({data}) >= {SPLICE_MIN} and type({b}) is _Spliced: {b}.splice({data})")
                emit(ind + 1, f"else: {b} += {data}")
                self.src.ns["_Spliced"] = Spliced
            else:
                emit(ind + 1, f"{b} += {data}")
        elif type(ft) is Array:
            emit(ind, f"if {expr} is None:")
            self.w_null(ind + 1, b, "i")
            emit(ind, "else:")
            self.w_count(ind + 1, b, f"len({expr})", "i")
            item = ft.item
            x = tmp("x")
            if isinstance(item, type):
                emit(ind + 1, f"for {x} in {expr}: {self.writer_of(item)}({b}, {x})")
            else:
                fixed = _fixed(item)
                if fixed is not None and fixed[0] in _ARRAYS:
                    emit(ind + 1, f"{b} += _array_{fixed[0]}(len({expr})).pack(*{expr})")
                else:
                    emit(ind + 1, f"for {x} in {expr}:")
                    self.w_value(ind + 2, item, x, b)
        elif type(ft) is StructType:
            emit(ind, f"{self.writer_of(ft.cls)}({b}, {expr})")
        elif type(ft) is NullableStruct:
            emit(ind, f"if {expr} is None:")
            emit(ind + 1, f"{b}.append(255)")
            emit(ind, "else:")
            emit(ind + 1, f"{b}.append(1)")
            emit(ind + 1, f"{self.writer_of(ft.cls)}({b}, {expr})")
        else:
            emit(ind, f"{self.fallback(ft)}.write(_writer_over({b}), {expr}, {self.flex}, {self.version})")
            self.src.ns["_writer_over"] = _writer_over

    def writer(self) -> None:
        emit, lay = self.src.emit, self.lay
        emit(0, "def write_to(b, o):")
        run: list[tuple[str, str]] = []

        def flush() -> None:
            nonlocal run
            if run:
                args = ", ".join(f"(o.{n} or _ZERO_UUID).bytes" if c == "16s" else f"o.{n}" for n, c in run)
                emit(1, f"b += {self.struct_fmt([c for _, c in run])}.pack({args})")
                run = []

        for name, ft in lay.plain:
            fixed = _fixed(ft)
            if fixed is not None:
                run.append((name, fixed[0]))
                continue
            flush()
            emit(1, f"v = o.{name}")
            self.w_value(1, ft, "v", "b")
        flush()
        if self.flex:
            fields = {fl.name: fl for fl in dataclasses.fields(self.cls)}  # type: ignore[arg-type]
            if not lay.tagged:
                emit(1, "b.append(0)  # no tagged fields")
                return
            emit(1, "# tagged fields: those that differ from their default, by tag")
            present = []
            for tag, name, _ft in lay.tagged:
                fl = fields[name]
                dflt = fl.default if fl.default is not dataclasses.MISSING else fl.default_factory()  # type: ignore[operator]
                emit(1, f"t{tag} = o.{name}")
                emit(1, f"p{tag} = {_differs(self.src, f't{tag}', dflt, f'_default_{name}')}")
                present.append(f"p{tag}")
            self.w_uvarint(1, "b", " + ".join(present))
            for tag, _name, ft in lay.tagged:
                emit(1, f"if p{tag}:")
                emit(2, "s = bytearray()")
                self.w_value(2, ft, f"t{tag}", "s")
                emit(2, f"b += {encode_uvarint(tag)!r}")
                self.w_uvarint(2, "b", "len(s)")
                emit(2, "b += s")
        elif not lay.plain:
            emit(1, "pass")


def _differs(src: _Source, expr: str, dflt: Any, hint: str) -> str:
    """An expression for `expr != dflt`. A struct default (a tagged struct field's) is compared
    field by field inline, as its dataclass __eq__ would, which is most of writing a partition
    that sends none of its tagged fields."""
    if dflt is None:
        return f"{expr} is not None"
    cls = type(dflt)
    if _is_struct(cls) and cls.__eq__ is not object.__eq__:  # a dataclass's own __eq__
        fields = [fl.name for fl in dataclasses.fields(dflt) if fl.compare]  # type: ignore[arg-type]
        if all(type(getattr(dflt, n)) in (int, str, bool, bytes) or getattr(dflt, n) is None for n in fields):
            parts = [f"{expr}.__class__ is not {src.bind(cls, cls.__name__)}"]
            parts += [f"{expr}.{n} is not None" if getattr(dflt, n) is None else f"{expr}.{n} != {getattr(dflt, n)!r}"
                      for n in fields]
            return " or ".join(parts)
    return f"{expr} != {src.const(dflt, hint)}"


def _slot_setters(cls: SchemaClass, fields: dict[str, dataclasses.Field[Any]]) -> dict[str, Any] | None:
    """Each field's slot descriptor `__set__`, or None when the class needs its own __init__ run."""
    if hasattr(cls, "__post_init__") or any(not fl.init for fl in fields.values()):
        return None
    out = {}
    for name in fields:
        d = next((k.__dict__[name] for k in cls.__mro__ if name in k.__dict__), None)
        if not isinstance(d, types.MemberDescriptorType):
            return None
        out[name] = d.__set__
    return out


def generate(cls: SchemaClass, version: int, flex: bool, resolve: Resolver) -> tuple[str, dict[str, Any]]:
    """The source of read_at/write_to for `cls` at `version`, and the namespace it runs in.
    `resolve(struct_class)` gives a nested struct's (read_at, write_to) at the same version."""
    g = _Gen(cls, version, flex, resolve)
    g.src.emit(0, f"# {cls.__module__}.{cls.__qualname__} v{version}{' (flexible)' if flex else ''}")
    g.reader()
    g.src.emit(0, "")
    g.writer()
    return "\n".join(g.src.lines) + "\n", g.src.ns


# generated body (all but the first line, a comment naming class and version) -> its compiled
# code: many versions of a struct generate the same code, compiled once
_CODE: dict[str, types.CodeType] = {}


def _renamed(code: types.CodeType, filename: str) -> types.CodeType:
    consts = tuple(_renamed(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def compile_codec(cls: SchemaClass, version: int, flex: bool, resolve: Resolver) -> tuple[ReadAt, WriteTo]:
    text, ns = generate(cls, version, flex, resolve)
    # Not "<...>": linecache only fetches lazily the lines of names that could be files. The source
    # is generated again if a traceback asks for it (the same text): kept, all the codecs' lines
    # would cost more memory than the codecs.
    filename = f"codec {cls.__module__}.{cls.__qualname__} v{version}{' flex' if flex else ''}"
    body = text.split("\n", 1)[1]
    code = _CODE.get(body)
    if code is None:
        code = _CODE[body] = compile(text, filename, "exec")
    elif code.co_filename != filename:
        code = _renamed(code, filename)
    exec(code, ns)  # noqa: S102 - our own generated source
    linecache.cache[filename] = (lambda: generate(cls, version, flex, resolve)[0],)
    return ns["read_at"], ns["write_to"]
