"""Kafka's primitive wire types: fixed-width integers, varints, strings, bytes, UUIDs.

Reading and writing are kept as two tiny classes over a buffer so that the schema engine can
compose them into per-version codecs without allocating intermediate objects per field.
"""

from __future__ import annotations

import struct
import uuid

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)


Buffer = bytes | bytearray | memoryview
SPLICE_MIN = 1024  # below this a copy costs less than one more piece of a vectored write


class Spliced(bytearray):
    """A frame being written that refers to its large record payloads instead of copying them in:
    the record batches a fetch read from a segment go to the socket from the buffer the read
    made, in a vectored write (`chunks`), so a fetched byte is copied once, by the read. Only
    a codec's records field splices (protocol/codegen.py); everything else is written in place."""

    __slots__ = ("parts",)

    def __init__(self, size: int = 0) -> None:
        super().__init__(size)
        self.parts: list[tuple[int, Buffer]] = []  # (where in this buffer, the payload that goes there)

    def splice(self, data: Buffer) -> None:
        self.parts.append((len(self), data))

    def total(self) -> int:
        """The frame's size: this buffer's bytes and the spliced payloads."""
        return len(self) + sum(len(d) for _, d in self.parts)

    def chunks(self) -> list[Buffer]:
        """The frame in order, the payloads in their places (nothing is copied)."""
        if not self.parts:
            return [self]
        whole = memoryview(self)
        out: list[Buffer] = []
        at = 0
        for pos, data in self.parts:
            if pos > at:
                out.append(whole[at:pos])
            out.append(data)
            at = pos
        if at < len(self):
            out.append(whole[at:])
        return out


class DecodeError(ValueError):
    """Raised when bytes cannot be read as the schema says: the request is malformed."""


def uvarint_at(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint at `pos` before `end`, and the position after it."""
    result = shift = 0
    while True:
        if pos >= end:
            raise DecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint too long")


class Reader:
    """A cursor over an immutable buffer; every read advances `pos` and bounds-checks."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.buf = memoryview(buf) if not isinstance(buf, memoryview) else buf
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, n: int) -> int:
        p = self.pos
        if n < 0 or p + n > self.end:
            raise DecodeError(f"need {n} bytes at {p}, have {self.end - p}")
        self.pos = p + n
        return p

    def int8(self) -> int:
        return _I8.unpack_from(self.buf, self._need(1))[0]  # type: ignore[no-any-return]

    def int16(self) -> int:
        return _I16.unpack_from(self.buf, self._need(2))[0]  # type: ignore[no-any-return]

    def uint16(self) -> int:
        return _U16.unpack_from(self.buf, self._need(2))[0]  # type: ignore[no-any-return]

    def int32(self) -> int:
        return _I32.unpack_from(self.buf, self._need(4))[0]  # type: ignore[no-any-return]

    def uint32(self) -> int:
        return _U32.unpack_from(self.buf, self._need(4))[0]  # type: ignore[no-any-return]

    def int64(self) -> int:
        return _I64.unpack_from(self.buf, self._need(8))[0]  # type: ignore[no-any-return]

    def float64(self) -> float:
        return _F64.unpack_from(self.buf, self._need(8))[0]  # type: ignore[no-any-return]

    def boolean(self) -> bool:
        return self.buf[self._need(1)] != 0

    def uvarint(self) -> int:
        result, self.pos = uvarint_at(self.buf, self.pos, self.end)
        return result

    def varint(self) -> int:
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def raw(self, n: int) -> bytes:
        p = self._need(n)
        return bytes(self.buf[p : p + n])

    def view(self, n: int) -> memoryview:
        p = self._need(n)
        return self.buf[p : p + n]

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.raw(16))

    # strings and bytes: classic (int16/int32 length, -1 = null) and compact (uvarint length+1, 0 = null)
    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        return str(self.view(n), "utf-8")

    def compact_string(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return str(self.view(n), "utf-8")

    def bytes_(self) -> bytes | None:
        n = self.int32()
        if n < 0:
            return None
        return self.raw(n)

    def compact_bytes(self) -> bytes | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self.raw(n)


class Writer:
    """An append-only byte builder."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self.buf)

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def uint16(self, v: int) -> None:
        self.buf += _U16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += _U32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def float64(self, v: float) -> None:
        self.buf += _F64.pack(v)

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uvarint(self, v: int) -> None:
        self.buf += encode_uvarint(v)

    def varint(self, v: int) -> None:
        self.buf += encode_uvarint((v << 1) ^ (v >> 63))

    def raw(self, b: bytes | bytearray | memoryview) -> None:
        self.buf += b

    def uuid(self, v: uuid.UUID | None) -> None:
        self.buf += (v or ZERO_UUID).bytes

    def string(self, v: str | None) -> None:
        if v is None:
            self.buf += _I16.pack(-1)
            return
        b = v.encode()
        self.buf += _I16.pack(len(b))
        self.buf += b

    def compact_string(self, v: str | None) -> None:
        if v is None:
            self.buf.append(0)
            return
        b = v.encode()
        self.buf += encode_uvarint(len(b) + 1)
        self.buf += b

    def bytes_(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            self.buf += _I32.pack(-1)
            return
        self.buf += _I32.pack(len(v))
        self.buf += v

    def compact_bytes(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            self.buf.append(0)
            return
        self.buf += encode_uvarint(len(v) + 1)
        self.buf += v


def encode_uvarint(v: int) -> bytes:
    if v < 0:
        v &= 0xFFFFFFFFFFFFFFFF
    if v < 0x80:
        return bytes((v,))
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def encode_varint(v: int) -> bytes:
    """Zig-zag signed varint (record fields use these)."""
    return encode_uvarint((v << 1) ^ (v >> 63))


def decode_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint at `pos`; returns (value, new position)."""
    result, pos = uvarint_at(buf, pos, len(buf))
    return (result >> 1) ^ -(result & 1), pos
