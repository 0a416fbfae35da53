"""The generated codecs (protocol/codegen.py) against the engine they replaced.

tests/helpers/schema_reference.py keeps the old closure-based codec. For every message class and
every version it declares, an instance with a non-default value in every field on the wire (nested
structs and arrays of two, tagged fields set), and one with every nullable field null, must encode
to the old engine's bytes and decode to the same value through both. Malformed input must fail the
same way: every truncation is a DecodeError, a null where a request may not have one is the same
DecodeError, and seeded byte mutations decode to the same value or the same exception type.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import random
import traceback
import uuid
from typing import Any

import pytest

import protocol.messages
import protocol.messages.registry  # noqa: F401 - requests refuse nulls, as in the broker
from protocol.messages.fetch import (
    EpochEndOffset,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    PartitionData,
    ReplicaState,
)
from protocol.messages.produce import ProduceRequest, TopicProduceData
from protocol.primitives import DecodeError, Reader, Writer
from protocol.schema import (
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
    Message,
    NullableStruct,
    Struct,
    StructType,
    f,
    refuse_nulls,
    schema,
    source,
)
from tests.helpers import schema_reference as ref


def _messages() -> list[type[Message]]:
    """Every message class declared under protocol/messages (API bodies and log record bodies)."""
    found: dict[str, type[Message]] = {}
    for info in pkgutil.iter_modules(protocol.messages.__path__, "protocol.messages."):
        mod = importlib.import_module(info.name)
        for obj in vars(mod).values():
            if (isinstance(obj, type) and issubclass(obj, Message) and "_codecs" in obj.__dict__
                    and hasattr(obj, "VERSIONS")):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


MESSAGES = _messages()
CASES = [pytest.param(cls, v, id=f"{cls.__name__}-v{v}")
         for cls in MESSAGES for v in range(cls.VERSIONS[0], cls.VERSIONS[1] + 1)]


def _on_wire(meta: Any, version: int, flex: bool) -> bool:
    rng = meta["versions"]
    if meta["tag"] is not None:
        if not flex:
            return False
        rng = meta["tagged"] or rng
    return rng is not None and rng[0] <= version <= rng[1]


class Values:
    """Distinct, non-default values by wire type; `nulls` makes every nullable field null instead."""

    def __init__(self, version: int, flex: bool, nulls: bool) -> None:
        self.version, self.flex, self.nulls = version, flex, nulls
        self.k = 0

    def struct(self, cls: type[Struct]) -> Any:
        kw = {}
        for fl in dataclasses.fields(cls):  # type: ignore[arg-type]
            m = fl.metadata
            if "ktype" in m and _on_wire(m, self.version, self.flex):
                nullable = "None" in str(fl.type)
                value = None if self.nulls and nullable else self.value(m["ktype"])
                dflt = fl.default if fl.default is not dataclasses.MISSING else None
                if value == dflt and value is not None:  # a bool: the other one
                    value = not value
                kw[fl.name] = value
        return cls(**kw)

    def value(self, ft: FieldType) -> Any:
        self.k += 1
        k = self.k
        ints = {id(INT8): -(k % 100) - 2, id(INT16): 300 + k, id(UINT16): 40000 + k, id(INT32): -70000 - k,
                id(UINT32): 3_000_000_000 + k, id(INT64): 2**40 + k}
        if id(ft) in ints:
            return ints[id(ft)]
        if ft is BOOL:
            return k % 2 == 0
        if ft is FLOAT64:
            return 0.5 + k
        if ft is UUID:
            return uuid.UUID(int=k * 0x0101_0101_0101_0101_0101 + 7)
        if ft is STRING:
            return f"s{k}-é中"
        if ft is BYTES:
            return bytes([k % 256, 0, 255])
        if ft is RECORDS:
            return b"batch" * (k % 3 + 1)
        if isinstance(ft, Array):
            item = ft.item
            return [self.struct(item) if isinstance(item, type) else self.value(item) for _ in range(2)]
        if isinstance(ft, StructType | NullableStruct):
            return self.struct(ft.cls)
        raise AssertionError(f"no value for {ft!r}")


def _instances(cls: type[Message], version: int) -> list[Message]:
    """Non-default values everywhere; nullable fields null; every field at its default."""
    flex = cls.is_flexible(version)
    return [Values(version, flex, nulls).struct(cls) for nulls in (False, True)] + [cls()]


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_same_bytes_and_values_as_the_old_engine(cls: type[Message], version: int) -> None:
    for msg in _instances(cls, version):
        data = msg.encode(version)
        assert data == ref.encode(msg, version)
        assert cls.decode(data, version) == msg
        assert ref.decode(cls, data, version) == msg
        w = Writer()  # the Reader/Writer entry points, as the framing and the assignors use them
        cls._codec(version, cls.is_flexible(version))[1](w, msg)
        assert w.getvalue() == data
        r = Reader(b"\x07" + data + b"\x09", 1)
        assert cls.read(r, version) == msg
        assert r.pos == len(data) + 1


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        return ("value", fn(*args))
    except Exception as e:  # noqa: BLE001 - the point is comparing what each engine raises
        return ("raised", type(e))


@pytest.mark.parametrize("cls", MESSAGES, ids=lambda c: c.__name__)
def test_every_truncation_is_a_decode_error(cls: type[Message]) -> None:
    for version in {cls.VERSIONS[0], cls.VERSIONS[1], cls.FLEXIBLE or cls.VERSIONS[0]}:
        data = _instances(cls, version)[0].encode(version)
        for n in range(len(data)):
            with pytest.raises(DecodeError):
                cls.decode(data[:n], version)


@pytest.mark.parametrize("cls", MESSAGES, ids=lambda c: c.__name__)
def test_mutated_bytes_decode_as_the_old_engine_decodes_them(cls: type[Message]) -> None:
    rnd = random.Random(cls.__name__)
    for version in {cls.VERSIONS[0], cls.VERSIONS[1], cls.FLEXIBLE or cls.VERSIONS[0]}:
        for msg in _instances(cls, version):
            data = msg.encode(version)
            for _ in range(40):
                b = bytearray(data)
                for _ in range(rnd.choice((1, 1, 2, 4))):
                    if b:
                        b[rnd.randrange(len(b))] = rnd.choice((0, 1, 0x7F, 0x80, 0xFF, rnd.randrange(256)))
                bad = bytes(b)
                ours = _outcome(cls.decode, bad, version)
                theirs = _outcome(ref.decode, cls, bad, version)
                assert ours == theirs, (version, bad.hex())


def _null_plants(cls: type[Struct], version: int, flex: bool) -> list[tuple[str, Any]]:
    """(field, bad value) for each non-nullable string/bytes/array field: None, and for arrays of
    strings or bytes, a list holding a None."""
    out: list[tuple[str, Any]] = []
    for fl in dataclasses.fields(cls):  # type: ignore[arg-type]
        m = fl.metadata
        if "ktype" not in m or not _on_wire(m, version, flex) or m["tag"] is not None or "None" in str(fl.type):
            continue
        ft = m["ktype"]
        if isinstance(ft, Array | type(STRING) | type(BYTES)):
            out.append((fl.name, None))
        if isinstance(ft, Array) and (ft.item is STRING or ft.item is BYTES):
            out.append((fl.name, [None]))
    return out


@pytest.mark.parametrize("cls", sorted(protocol.messages.registry.REQUESTS.values(), key=lambda c: c.API_KEY),
                         ids=lambda c: c.__name__)
def test_requests_refuse_the_nulls_the_old_engine_refused(cls: type[Message]) -> None:
    for version in range(cls.VERSIONS[0], cls.VERSIONS[1] + 1):
        msg = _instances(cls, version)[0]
        for name, bad in _null_plants(cls, version, cls.is_flexible(version)):
            data = ref.encode(dataclasses.replace(msg, **{name: bad}), version)
            with pytest.raises(DecodeError) as ours:
                cls.decode(data, version)
            with pytest.raises(DecodeError) as theirs:
                ref.decode(cls, data, version)
            assert str(ours.value) == str(theirs.value)


def test_nulls_are_planted_in_most_requests() -> None:
    """The test above checks something: most requests have a field that may not be null."""
    with_plants = [cls for cls in protocol.messages.registry.REQUESTS.values()
                   if _null_plants(cls, cls.VERSIONS[1], cls.is_flexible(cls.VERSIONS[1]))]
    assert len(with_plants) > 0.8 * len(protocol.messages.registry.REQUESTS)


def test_absent_fields_get_fresh_defaults() -> None:
    """Fields a version does not carry get their dataclass defaults, a new list or struct per object
    (as the dataclass __init__ gives)."""
    data = FetchRequest(max_wait_ms=1, min_bytes=1, max_bytes=3).encode(3)
    a, b = FetchRequest.decode(data, 3), FetchRequest.decode(data, 3)
    assert a.forgotten_topics_data == [] and a.forgotten_topics_data is not b.forgotten_topics_data
    assert a.replica_state == ReplicaState() and a.replica_state is not b.replica_state
    assert (a.cluster_id, a.max_bytes, a.rack_id) == (None, 3, "")  # v3 carries max_bytes
    part = PartitionData(partition_index=1, error_code=0, high_watermark=5, records=None)
    resp = FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=[part, part])])
    got = FetchResponse.decode(resp.encode(16), 16).responses[0].partitions
    assert got[0].diverging_epoch == got[1].diverging_epoch and got[0].diverging_epoch is not got[1].diverging_epoch


def test_a_tagged_struct_is_sent_when_any_of_its_fields_differs_from_the_default() -> None:
    def response(diverging: EpochEndOffset) -> FetchResponse:
        part = PartitionData(partition_index=1, error_code=0, high_watermark=5, records=None,
                             diverging_epoch=diverging)
        return FetchResponse(responses=[FetchableTopicResponse(partitions=[part])])

    plain = response(EpochEndOffset()).encode(16)
    for diverging in (EpochEndOffset(epoch=-1, end_offset=5), EpochEndOffset(epoch=3, end_offset=-1)):
        data = response(diverging).encode(16)
        assert data == ref.encode(response(diverging), 16)
        assert FetchResponse.decode(data, 16) == response(diverging)
        assert len(data) == len(plain) + 2 + 13  # tag, size; int32, int64, its own (no) tagged fields
    assert plain == ref.encode(response(EpochEndOffset()), 16)


# --- structs declared here: refuse_nulls after generation, and a FieldType the generator does not know


@schema
class _Leaf(Struct):
    name: str = f(STRING)


@schema
class _Tree(Message):
    API_KEY = -1
    VERSIONS = (0, 1)
    FLEXIBLE = 1
    leaves: list[_Leaf] = f(Array(_Leaf))


@schema
class _OtherTree(Message):
    API_KEY = -1
    VERSIONS = (0, 0)
    FLEXIBLE = None
    leaf: _Leaf = f(_Leaf)


def test_refuse_nulls_reaches_codecs_generated_before_it() -> None:
    """A struct made strict (refuse_nulls on any request holding it) is strict inside every message
    that holds it, even one whose codec was generated before: the old engine looked nested codecs up
    per call; generated ones bind them, so refuse_nulls drops them all."""
    data = ref.encode(_Tree(leaves=[_Leaf(name=None)]), 0)  # type: ignore[arg-type]
    assert _Tree.decode(data, 0).leaves[0].name is None  # generated now, lenient
    refuse_nulls(_OtherTree)
    with pytest.raises(DecodeError, match="non-nullable field _Leaf.name"):
        _Tree.decode(data, 0)
    with pytest.raises(DecodeError, match="non-nullable field _Leaf.name"):
        ref.decode(_Tree, data, 0)


class _ZigZag(FieldType):
    """A signed varint: no wire type of Kafka's messages, only here to exercise the fallback."""

    name = "zigzag"

    def read(self, r: Reader, flex: bool, version: int) -> Any:
        return r.varint() * (10 if flex else 1)

    def write(self, w: Writer, v: Any, flex: bool, version: int) -> None:
        w.varint(v // (10 if flex else 1))

    def default(self) -> Any:
        return 0


ZIGZAG = _ZigZag()


@schema
class _Custom(Message):
    API_KEY = -1
    VERSIONS = (0, 1)
    FLEXIBLE = 1
    a: int = f(ZIGZAG)
    b: int = f(INT32)
    many: list[int] = f(Array(ZIGZAG))
    tagged: int = f(ZIGZAG, "1+", tag=3)


@pytest.mark.parametrize("version", [0, 1])
def test_a_field_type_the_generator_does_not_know_uses_its_own_read_and_write(version: int) -> None:
    msg = _Custom(a=-1230, b=7, many=[10, -20, 3000000], tagged=-50 if version else 0)
    data = msg.encode(version)
    assert data == ref.encode(msg, version)
    assert _Custom.decode(data, version) == msg == ref.decode(_Custom, data, version)


@schema
class _Floats(Message):
    API_KEY = -1
    VERSIONS = (0, 1)
    FLEXIBLE = None
    a: float = f(FLOAT64, "1+", default=float("inf"))
    b: float = f(FLOAT64, "1+", default=-0.0)
    c: float = f(FLOAT64, default=1.5)


def test_defaults_without_a_literal_are_bound_not_written_into_the_source() -> None:
    got = _Floats.decode(_Floats(c=2.0).encode(0), 0)
    assert (got.a, got.b, got.c) == (float("inf"), 0.0, 2.0) and str(got.b) == "-0.0"
    assert _Floats.decode(_Floats().encode(1), 1) == _Floats() == ref.decode(_Floats, _Floats().encode(1), 1)


def test_an_array_of_structs_is_named_by_its_item_class() -> None:
    """The generated source comments each field with its type; a struct with a field called `name`
    (TopicProduceData) used to name its arrays after that field's slot descriptor."""
    assert repr(Array(TopicProduceData)) == "[]TopicProduceData" and repr(Array(STRING)) == "[]string"
    assert "# topic_data: []TopicProduceData\n" in source(ProduceRequest, 9)


def test_source_is_the_generated_code() -> None:
    text = source(FetchRequest, 17)
    assert text.startswith("# protocol.messages.fetch.FetchRequest v17 (flexible)\n")
    assert "def read_at(buf, pos, end):" in text and "def write_to(b, o):" in text
    # one unpack for the six fixed-width fields in a row, one bounds check for them
    assert "if pos + 21 > end: raise _need(21, pos, end)" in text
    assert "_s_iiibii.unpack_from(buf, pos)" in text
    assert "read_FetchTopic(buf, pos, end)" in text and "read_ReplicaState(buf, tpos, tend)" in text
    compile(text, "<source>", "exec")
    assert "(flexible)" not in source(ReplicaState, 17) and "(flexible)" in source(ReplicaState, 17, flex=True)
    # what runs is that code: its line numbers are the source's (tracebacks and profiles show them)
    code = FetchRequest._raw(17, True)[0].__code__
    assert code.co_filename == "codec protocol.messages.fetch.FetchRequest v17 flex"
    assert text.splitlines()[code.co_firstlineno - 1] == "def read_at(buf, pos, end):"


def test_a_traceback_through_generated_code_shows_its_lines() -> None:
    data = FetchRequest(max_wait_ms=1, min_bytes=1, topics=[FetchTopic(topic_id=uuid.UUID(int=1))]).encode(17)
    try:
        FetchRequest.decode(data[:-3], 17)
    except DecodeError:
        text = traceback.format_exc()
    else:
        raise AssertionError("decoded a truncated request")
    assert 'File "codec protocol.messages.fetch.FetchRequest v17 flex", line' in text
    assert "    if pos >= end: raise DecodeError('truncated varint')\n" in text  # the generated line itself
