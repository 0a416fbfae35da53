"""Seeded malformed Kafka request frames, built from the protocol's own schemas.

Each frame starts as a *valid* request of some API key and version the target listener supports
(protocol/supported.py), its fields filled from the schema (protocol/schema.py: every field the
version has, tagged ones included, arrays of nested structs, record batches), then encoded and,
most of the time, mutated: truncated, bits flipped, bytes overwritten with boundary values,
absurd lengths and array counts planted, the api key or version made wrong, bytes spliced or
appended, or replaced by random bytes. The same seed gives the same frames, so a failure replays
(`python -m tests.helpers.fuzz --seed N`).

Values are mostly sane (small counts, short timeouts, a few topic names) so that the requests a
mutation leaves decodable get past validation into the handlers, which is where bugs hide.
"""

from __future__ import annotations

import dataclasses
import random
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from protocol.framing import encode_request
from protocol.headers import read_request_header
from protocol.messages.registry import REQUESTS
from protocol.primitives import DecodeError, Reader
from protocol.records import build_batch_from_messages
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
    Message,
    NullableStruct,
    StructType,
    _Bytes,
    _String,
)
from protocol.supported import CONTROLLER_SUPPORTED, SUPPORTED

TOPICS = ("fz0", "fz1", "fz2", "__consumer_offsets", "__transaction_state")  # never the checked topic
NAMES = ("g0", "g1", "t0", "t1", "m0", "", "c0")
INT_EDGES = {
    INT8: (-(2**7), 2**7 - 1), INT16: (-(2**15), 2**15 - 1), UINT16: (0, 2**16 - 1),
    INT32: (-(2**31), 2**31 - 1), UINT32: (0, 2**32 - 1), INT64: (-(2**63), 2**63 - 1),
}
SMALL_FIELDS = ("timeout", "wait", "delay", "_ms", "interval")  # kept short so requests do not park
LISTENERS = {"client": SUPPORTED, "broker": SUPPORTED, "controller": CONTROLLER_SUPPORTED}


@dataclass(frozen=True, slots=True)
class Frame:
    api_key: int
    version: int
    mutation: str
    data: bytes  # size prefix included
    desyncs: bool = False  # its size prefix lies: nothing after it on the connection is framed right
    fatal: bool = False  # the broker cannot decode it (or its header): it closes the connection


def undecodable(body: bytes, supported: dict[int, tuple[int, int]]) -> bool:
    """Would the broker refuse this frame body outright (header, API key, version, body)? The same
    codec the broker decodes with, so a batch can end on its one refused frame."""
    if len(body) < 8:
        return True
    api_key, version = struct.unpack_from(">hh", body)
    cls = REQUESTS.get(api_key)
    rng = supported.get(api_key)
    try:
        r = Reader(body)
        read_request_header(r, cls.FLEXIBLE if cls else None)
        if cls is None or rng is None:
            return True
        if not rng[0] <= version <= rng[1]:
            return api_key != 18  # ApiVersions is answered with the ranges instead
        cls.read(r, version)
    except (DecodeError, UnicodeDecodeError, ValueError):
        return True
    return False


class Generator:
    def __init__(self, seed: int, listener: str = "client") -> None:
        self.rnd = random.Random(seed)
        self.supported = LISTENERS[listener]
        self.apis = sorted((k, v) for k, (lo, hi) in self.supported.items() for v in range(lo, hi + 1)
                           if k in REQUESTS)
        self.corr = 0

    # ---- valid requests --------------------------------------------------------------------
    def value(self, ftype: FieldType, name: str, version: int, depth: int) -> Any:
        rnd = self.rnd
        if ftype in INT_EDGES:
            lo, hi = INT_EDGES[ftype]
            roll = rnd.random()
            if roll < 0.04:
                return rnd.choice((lo, hi, -1, 0))
            if any(s in name for s in SMALL_FIELDS):
                return rnd.choice((0, 1, 10, 100, -1))
            return max(lo, min(hi, rnd.choice((0, 0, 1, 1, 2, 3, -1, rnd.randrange(0, 1000)))))
        if ftype is BOOL:
            return rnd.random() < 0.5
        if ftype is FLOAT64:
            return rnd.choice((0.0, 1.5, -1.0))
        if ftype is UUID:
            return rnd.choice((uuid.UUID(int=0), uuid.UUID(int=rnd.getrandbits(128))))
        if ftype is RECORDS:
            return self.records()
        if isinstance(ftype, _String):
            if rnd.random() < 0.03:
                return None
            return rnd.choice(TOPICS if "topic" in name or name == "name" else NAMES)
        if isinstance(ftype, _Bytes):
            return None if rnd.random() < 0.1 else rnd.randbytes(rnd.randrange(0, 24))
        if isinstance(ftype, Array):
            if rnd.random() < 0.03:
                return None
            n = 0 if depth > 3 else rnd.choice((0, 1, 1, 2, 3))
            item = ftype.item
            if isinstance(item, type):
                return [self.struct(item, version, depth + 1) for _ in range(n)]
            return [self.value(item, name, version, depth + 1) for _ in range(n)]
        if isinstance(ftype, StructType):
            return self.struct(ftype.cls, version, depth + 1)
        if isinstance(ftype, NullableStruct):
            return None if rnd.random() < 0.3 else self.struct(ftype.cls, version, depth + 1)
        return ftype.default()

    def struct(self, cls: type[Any], version: int, depth: int = 0) -> Any:
        kw = {}
        for fl in dataclasses.fields(cls):
            m = fl.metadata
            if "ktype" not in m:
                continue
            kw[fl.name] = self.value(m["ktype"], fl.name, version, depth)
        return cls(**kw)

    def records(self) -> bytes | None:
        rnd = self.rnd
        roll = rnd.random()
        if roll < 0.1:
            return None
        if roll < 0.25:
            return rnd.randbytes(rnd.randrange(0, 80))
        msgs = [(rnd.choice((None, b"k")), rnd.randbytes(rnd.randrange(0, 40)), [], None)
                for _ in range(rnd.randrange(1, 4))]
        pid = rnd.choice((-1, -1, rnd.randrange(0, 5000)))
        return build_batch_from_messages(msgs, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                         base_sequence=0 if pid >= 0 else -1,
                                         transactional=pid >= 0 and rnd.random() < 0.3)

    def valid(self, api_key: int, version: int) -> bytes:
        cls: type[Message] = REQUESTS[api_key]
        msg = self.struct(cls, version)
        self.corr = (self.corr + 1) & 0x3FFFFFFF
        return encode_request(msg, version, self.corr, self.rnd.choice(("fuzz", "", None)))

    # ---- mutations -------------------------------------------------------------------------
    def frame(self) -> Frame:
        rnd = self.rnd
        api_key, version = rnd.choice(self.apis)
        try:
            data = self.valid(api_key, version)
        except (struct.error, ValueError, OverflowError, TypeError, AttributeError):
            data = encode_request(REQUESTS[api_key](), version, 1, "fuzz")  # a value our writer refuses
        body = bytearray(data[4:])
        roll = rnd.random()
        desyncs = False
        if roll < 0.15:
            mutation = "valid"
        elif roll < 0.30:
            mutation = "truncated"
            del body[rnd.randrange(0, len(body) + 1):]
        elif roll < 0.45:
            mutation = "bit-flipped"
            for _ in range(rnd.randrange(1, 9)):
                i = rnd.randrange(len(body))
                body[i] ^= 1 << rnd.randrange(8)
        elif roll < 0.55:
            mutation = "boundary bytes"
            i = rnd.randrange(len(body))
            body[i:i + 4] = bytes([rnd.choice((0x00, 0xFF, 0x7F, 0x80))] * rnd.randrange(1, 5))
        elif roll < 0.68:
            mutation = "absurd length"  # an array count, a string or bytes length, a varint
            i = rnd.randrange(8, max(9, len(body)))
            plant = rnd.choice((struct.pack(">i", 2**31 - 1), struct.pack(">i", -2), struct.pack(">i", 2**20),
                                struct.pack(">h", 2**15 - 1), struct.pack(">h", -2),
                                b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
                                b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80"))
            body[i:i + len(plant)] = plant
        elif roll < 0.74:
            mutation = "wrong version"
            struct.pack_into(">h", body, 2, rnd.choice((-1, -32768, 32767, version + 1, version + 100)))
        elif roll < 0.78:
            mutation = "unknown api key"
            struct.pack_into(">h", body, 0, rnd.choice((-1, 17, 29, 36, 50, 68, 999, 32767, -32768)))
        elif roll < 0.84:
            mutation = "spliced"
            a, b = sorted((rnd.randrange(len(body)), rnd.randrange(len(body))))
            i = rnd.randrange(len(body))
            body[i:i] = body[a:b + 1]
        elif roll < 0.90:
            mutation = "trailing garbage"
            body += rnd.randbytes(rnd.randrange(1, 64))
        elif roll < 0.95:
            mutation = "random bytes"
            body = bytearray(rnd.randbytes(rnd.randrange(0, 200)))
        else:
            mutation = "lying size"
            desyncs = True
            size = rnd.choice((len(body) + rnd.randrange(1, 64), max(0, len(body) - rnd.randrange(1, 64)),
                               -1, -(2**31), 2**31 - 1, 7, 0))
            return Frame(api_key, version, mutation, struct.pack(">i", size) + bytes(body), desyncs)
        return Frame(api_key, version, mutation, struct.pack(">i", len(body)) + bytes(body), desyncs,
                     len(body) < 8 or undecodable(bytes(body), self.supported))

    def frames(self) -> Iterator[Frame]:
        while True:
            yield self.frame()
