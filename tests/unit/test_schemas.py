"""Schema round trips for every registered API and version, plus byte-exact known encodings.

The property tests derive a hypothesis strategy from each dataclass's field metadata, so a new
module in the registry is covered without writing anything here. Each encoding is also decoded and
re-encoded by kafka-python's own JSON-driven codec where that is installed: an independent oracle
for field order and types. The hand-written cases pin the wire format itself, computed by hand from
Kafka's message definitions.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pkgutil
import struct
import uuid
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.messages.api_versions import ApiVersionsResponse
from protocol.messages.fetch import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.messages.registry import REQUESTS, RESPONSES
from protocol.primitives import Reader
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
)

# ---------------------------------------------------------------------------------------------
# strategies derived from field metadata

_INTS: dict[int, tuple[int, int]] = {
    id(INT8): (-(2**7), 2**7 - 1),
    id(INT16): (-(2**15), 2**15 - 1),
    id(UINT16): (0, 2**16 - 1),
    id(INT32): (-(2**31), 2**31 - 1),
    id(UINT32): (0, 2**32 - 1),
    id(INT64): (-(2**63), 2**63 - 1),
}
# Examples per (class, version): ~340 cases at a millisecond or two each. Raise it for a deeper local run.
_EXAMPLES = int(os.environ.get("KETCH_SCHEMA_EXAMPLES", "10"))
_TEXT = st.text("aZ0-é中😀", max_size=6)  # multi-byte characters: the length prefix counts bytes
_BLOB = st.binary(max_size=12)


def _on_wire(meta: Any, version: int, flex: bool) -> bool:
    """Mirror of the engine's rule for whether a field is encoded at this version."""
    rng = meta["versions"]
    if meta["tag"] is not None:
        if not flex:
            return False
        rng = meta["tagged"] or rng
    return rng is not None and rng[0] <= version <= rng[1]


def _value(ft: FieldType, version: int, flex: bool, depth: int, nullable: bool = True) -> st.SearchStrategy[Any]:
    """Values of `ft`; null only where the field may be (its annotation says `| None`, as Kafka's
    nullableVersions: the decoder refuses null elsewhere, and array elements are never null)."""
    def maybe(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.none() | s if nullable else s

    if id(ft) in _INTS:
        lo, hi = _INTS[id(ft)]
        return st.integers(lo, hi)
    if ft is BOOL:
        return st.booleans()
    if ft is FLOAT64:
        return st.floats(allow_nan=False)
    if ft is UUID:
        return st.uuids()
    if ft is STRING:
        return maybe(_TEXT)
    if ft is BYTES or ft is RECORDS:
        return maybe(_BLOB)
    if isinstance(ft, Array):
        item = ft.item
        inner = (_struct(item, version, flex, depth + 1) if isinstance(item, type)
                 else _value(item, version, flex, depth + 1, nullable=False))
        return maybe(st.lists(inner, max_size=2 if depth < 2 else 1))
    if isinstance(ft, StructType):
        return _struct(ft.cls, version, flex, depth + 1)
    if isinstance(ft, NullableStruct):
        return st.none() | _struct(ft.cls, version, flex, depth + 1)
    raise AssertionError(f"no strategy for {ft!r}")


def _struct(cls: type[Struct], version: int, flex: bool, depth: int = 0) -> st.SearchStrategy[Any]:
    kw = {
        fl.name: _value(fl.metadata["ktype"], version, flex, depth, "None" in str(fl.type))
        for fl in dataclasses.fields(cls)  # type: ignore[arg-type]
        if "ktype" in fl.metadata and _on_wire(fl.metadata, version, flex)
    }
    return st.builds(cls, **kw)


def _norm(x: Any) -> Any:
    """Comparable form: RECORDS decode as memoryviews over the input, everything else as given."""
    if isinstance(x, Struct):
        return (type(x).__name__, tuple(_norm(getattr(x, fl.name)) for fl in dataclasses.fields(x)))  # type: ignore[arg-type]
    if isinstance(x, list):
        return [_norm(i) for i in x]
    if isinstance(x, memoryview | bytearray):
        return bytes(x)
    return x


def _kafka_python_codecs() -> dict[str, Any]:
    with warnings.catch_warnings():  # its schema loading uses deprecated importlib.resources calls
        warnings.simplefilter("ignore", DeprecationWarning)
        return _load_kafka_python_codecs()


def _load_kafka_python_codecs() -> dict[str, Any]:
    """kafka-python (a dev dependency) has its own codec driven by Kafka's JSON: an independent oracle.

    Only its 3.x line has it; with an older one this returns nothing and the oracle check is skipped.
    """
    try:
        import kafka.protocol
        from kafka.protocol.api_message import ApiMessage
    except ImportError:
        return {}
    found: dict[str, Any] = {}
    for info in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        if ".old" in info.name or "stubs" in info.name:
            continue
        try:
            mod = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - an optional oracle; a module it cannot import is just absent
            continue
        for name, obj in vars(mod).items():
            if isinstance(obj, type) and issubclass(obj, ApiMessage) and obj is not ApiMessage:
                found.setdefault(name, obj)
    return found


_ORACLE = _kafka_python_codecs()


def _oracle_quirk(msg: Message, version: int) -> bool:
    """Inputs where kafka-python legitimately differs from our lenient engine."""
    # null topics only exist from v1; kafka-python writes v0's null as an empty array
    if isinstance(msg, MetadataRequest) and version == 0 and msg.topics is None:
        return True
    # kafka-python decodes any ApiVersions response carrying an error as v0 (the downgrade path)
    return isinstance(msg, ApiVersionsResponse) and msg.error_code != 0


def _oracle_agrees(cls: type[Message], msg: Message, version: int, buf: bytes) -> None:
    oracle = _ORACLE.get(cls.__name__)
    if oracle is None or version > oracle.max_version or _oracle_quirk(msg, version):
        return
    theirs = oracle.decode(buf, version=version)
    if not hasattr(theirs, "_header"):  # some of its response classes leave this slot unset on decode
        theirs._header = None
    assert theirs.encode(version=version) == buf


_CASES = [
    pytest.param(cls, v, id=f"{cls.__name__}-v{v}")
    for reg in (REQUESTS, RESPONSES)
    for cls in reg.values()
    for v in range(cls.VERSIONS[0], cls.VERSIONS[1] + 1)
]


@pytest.mark.parametrize(("cls", "version"), _CASES)
def test_round_trip(cls: type[Message], version: int) -> None:
    flex = cls.is_flexible(version)

    @settings(max_examples=_EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(_struct(cls, version, flex))
    def check(msg: Message) -> None:
        buf = msg.encode(version)
        r = Reader(buf)
        back = cls.read(r, version)
        assert r.remaining() == 0
        assert _norm(back) == _norm(msg)
        assert back.encode(version) == buf
        _oracle_agrees(cls, msg, version, buf)

    check()


# The quorum's own messages: kafka-python, a client, does not carry them. They round-trip above all
# the same, the 3-process quorum tests use them between real brokers, and AlterPartition's bytes
# are checked by hand below (AssignReplicasToDirs': test_schemas_assign_replicas_to_dirs.py,
# GetReplicaLogInfo's: test_schemas_get_replica_log_info.py).
_NOT_IN_ORACLE = {f"{n}{kind}" for n in ("Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "FetchSnapshot",
                                          "AllocateProducerIds", "BrokerRegistration", "BrokerHeartbeat",
                                          "AlterPartition", "AssignReplicasToDirs", "GetReplicaLogInfo",
                                          "ConsumerGroupHeartbeat", "ConsumerGroupDescribe",
                                          "ShareGroupHeartbeat", "ShareGroupDescribe", "ShareFetch",
                                          "ShareAcknowledge", "InitializeShareGroupState", "ReadShareGroupState",
                                          "WriteShareGroupState", "DeleteShareGroupState")
                  for kind in ("Request", "Response")}


def test_alter_partition_v3_bytes_follow_kafkas_json() -> None:
    """AlterPartitionRequest v3, field by field as AlterPartitionRequest.json orders them
    (flexible: compact arrays, tagged-field counts): BrokerId, BrokerEpoch, Topics[TopicId,
    Partitions[PartitionIndex, LeaderEpoch, NewIsrWithEpochs[BrokerId, BrokerEpoch],
    LeaderRecoveryState, PartitionEpoch]]."""
    import uuid

    from protocol.messages.alter_partition import AlterPartitionRequest, BrokerState, PartitionData, TopicData
    from protocol.primitives import Reader, Writer

    tid = uuid.UUID(int=7)
    req = AlterPartitionRequest(broker_id=2, broker_epoch=9, topics=[TopicData(topic_id=tid, partitions=[
        PartitionData(partition_index=1, leader_epoch=4, new_isr_with_epochs=[BrokerState(broker_id=2, broker_epoch=9)],
                      leader_recovery_state=0, partition_epoch=6)])])
    w = Writer()
    req.write(w, 3)
    expected = (struct.pack(">iq", 2, 9) + b"\x02" + tid.bytes + b"\x02" + struct.pack(">ii", 1, 4)
                + b"\x02" + struct.pack(">iq", 2, 9) + b"\x00" + b"\x00" + struct.pack(">i", 6) + b"\x00"
                + b"\x00" + b"\x00")
    assert w.getvalue() == expected
    assert AlterPartitionRequest.read(Reader(expected), 3) == req


def test_consumer_group_heartbeat_v1_bytes_follow_kafkas_json() -> None:
    """ConsumerGroupHeartbeat v1, as ConsumerGroupHeartbeatRequest/Response.json order the fields
    (flexible from v0): the request librdkafka 2.16 writes, and a response whose Assignment, a
    nullable struct, is an int8 marker (1 present, -1 null) before its fields, as librdkafka reads it."""
    import uuid

    from protocol.messages.consumer_group_heartbeat import (
        ConsumerGroupHeartbeatRequest,
        ConsumerGroupHeartbeatResponse,
        HeartbeatAssignment,
        HeartbeatTopicPartitions,
    )

    t = uuid.UUID(int=7)
    req = (b"\x02g" + b"\x02m" + b"\x00\x00\x00\x00"  # GroupId, MemberId, MemberEpoch 0
           + b"\x00" + b"\x00"  # InstanceId, RackId: null
           + b"\x00\x04\x93\xe0"  # RebalanceTimeoutMs 300000
           + b"\x02\x02t"  # SubscribedTopicNames ["t"]
           + b"\x00" + b"\x00"  # SubscribedTopicRegex, ServerAssignor: null
           + b"\x01"  # TopicPartitions: []
           + b"\x00")  # tagged fields
    assert ConsumerGroupHeartbeatRequest.decode(req, 1) == ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, rebalance_timeout_ms=300000, subscribed_topic_names=["t"],
        topic_partitions=[])
    resp = ConsumerGroupHeartbeatResponse(member_id="m", member_epoch=3, heartbeat_interval_ms=5000,
                                          assignment=HeartbeatAssignment(topic_partitions=[
                                              HeartbeatTopicPartitions(topic_id=t, partitions=[0, 2])]))
    assert resp.encode(1) == (b"\x00\x00\x00\x00" + b"\x00\x00" + b"\x00" + b"\x02m" + b"\x00\x00\x00\x03"
                              + b"\x00\x00\x13\x88" + b"\x01" + b"\x02" + t.bytes + b"\x03" + b"\x00\x00\x00\x00"
                              + b"\x00\x00\x00\x02" + b"\x00" + b"\x00" + b"\x00")
    assert ConsumerGroupHeartbeatResponse(member_epoch=1).encode(1)[-2:] == b"\xff\x00"


def test_oracle_is_available() -> None:
    assert _ORACLE, "kafka-python's JSON codec is missing: the cross-check oracle cannot run"
    missing = [c.__name__ for reg in (REQUESTS, RESPONSES) for c in reg.values()
               if c.__name__ not in _ORACLE and c.__name__ not in _NOT_IN_ORACLE]
    assert not missing


def test_registry_is_consistent() -> None:
    assert REQUESTS.keys() == RESPONSES.keys()
    for key, req in REQUESTS.items():
        resp = RESPONSES[key]
        assert req.API_KEY == resp.API_KEY == key
        assert req.VERSIONS == resp.VERSIONS
        assert req.FLEXIBLE == resp.FLEXIBLE
        assert req.__name__.endswith("Request") and resp.__name__.endswith("Response")


def test_defaults_round_trip_every_version() -> None:
    for reg in (REQUESTS, RESPONSES):
        for cls in reg.values():
            for v in range(cls.VERSIONS[0], cls.VERSIONS[1] + 1):
                msg = cls()
                assert _norm(cls.decode(msg.encode(v), v)) == _norm(msg), (cls.__name__, v)


# ---------------------------------------------------------------------------------------------
# byte-exact encodings, worked out by hand from the message definitions


def _hex(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def _check(msg: Message, version: int, expected: bytes) -> None:
    assert msg.encode(version) == expected
    assert _norm(type(msg).decode(expected, version)) == _norm(msg)


def test_produce_request_v3() -> None:
    msg = ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=1000,
        topic_data=[TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=b"abc")])],
    )
    expected = _hex(
        "ffff"  # transactional_id: null (int16 -1)
        "ffff"  # acks -1
        "000003e8"  # timeout_ms 1000
        "00000001"  # topic_data: 1 element
        "0001 74"  # name "t"
        "00000001"  # partition_data: 1 element
        "00000000"  # index 0
        "00000003 616263"  # records: int32 length + bytes
    )
    _check(msg, 3, expected)
    # v0-2 have no transactional_id at all
    assert msg.encode(2) == expected[2:]


def test_produce_request_v9_flexible() -> None:
    msg = ProduceRequest(
        transactional_id="tx", acks=1, timeout_ms=1000,
        topic_data=[TopicProduceData(name="t", partition_data=[PartitionProduceData(index=2, records=None)])],
    )
    expected = _hex(
        "03 7478"  # transactional_id: compact string, uvarint(len + 1)
        "0001"  # acks
        "000003e8"  # timeout_ms
        "02"  # topic_data: compact array of 1
        "02 74"  # name "t"
        "02"  # partition_data: compact array of 1
        "00000002"  # index 2
        "00"  # records: null
        "00"  # partition tag buffer: empty
        "00"  # topic tag buffer
        "00"  # request tag buffer
    )
    _check(msg, 9, expected)


def test_fetch_response_v4() -> None:
    part = PartitionData(
        partition_index=0, error_code=0, high_watermark=10, last_stable_offset=10,
        aborted_transactions=[AbortedTransaction(producer_id=7, first_offset=3)], records=b"xy",
    )
    msg = FetchResponse(throttle_time_ms=5, responses=[FetchableTopicResponse(topic="t", partitions=[part])])
    expected = _hex(
        "00000005"  # throttle_time_ms
        "00000001"  # responses: 1
        "0001 74"  # topic "t"
        "00000001"  # partitions: 1
        "00000000"  # partition_index
        "0000"  # error_code
        "000000000000000a"  # high_watermark 10
        "000000000000000a"  # last_stable_offset 10 (v4+)
        "00000001"  # aborted_transactions: 1
        "0000000000000007 0000000000000003"  # producer_id 7, first_offset 3
        "00000002 7879"  # records
    )
    _check(msg, 4, expected)


def test_fetch_response_v12_tagged_fields() -> None:
    part = PartitionData(
        partition_index=1, error_code=0, high_watermark=100, aborted_transactions=None,
        current_leader=LeaderIdAndEpoch(leader_id=2, leader_epoch=3), records=None,
    )
    msg = FetchResponse(session_id=0x01020304, responses=[FetchableTopicResponse(topic="t", partitions=[part])])
    expected = _hex(
        "00000000"  # throttle_time_ms
        "0000"  # error_code (v7+)
        "01020304"  # session_id (v7+)
        "02"  # responses: compact array of 1
        "02 74"  # topic "t" (compact; v0-12)
        "02"  # partitions: 1
        "00000001"  # partition_index
        "0000"  # error_code
        "0000000000000064"  # high_watermark 100
        "ffffffffffffffff"  # last_stable_offset: default -1
        "ffffffffffffffff"  # log_start_offset: default -1
        "00"  # aborted_transactions: null
        "ffffffff"  # preferred_read_replica: default -1
        "00"  # records: null
        "01"  # partition tag buffer: 1 field (diverging_epoch, snapshot_id at defaults are omitted)
        "01 09"  # tag 1 (current_leader), 9 bytes
        "00000002 00000003 00"  # leader_id, leader_epoch, struct's own empty tag buffer
        "00"  # topic tag buffer
        "00"  # response tag buffer (node_endpoints is v16+)
    )
    _check(msg, 12, expected)

    # an unknown tag in the top-level buffer is skipped, not an error
    unknown = expected[:-1] + _hex("01 09 02 abcd")
    assert _norm(FetchResponse.decode(unknown, 12)) == _norm(msg)


def test_fetch_response_v16_node_endpoints() -> None:
    msg = FetchResponse(node_endpoints=[NodeEndpoint(node_id=1, host="h", port=9092, rack=None)])
    expected = _hex(
        "00000000 0000 00000000"  # throttle_time_ms, error_code, session_id
        "01"  # responses: empty compact array
        "01"  # tag buffer: 1 field
        "00 0d"  # tag 0 (node_endpoints), 13 bytes
        "02 00000001 02 68 00002384 00 00"  # 1 endpoint: node_id, host "h", port 9092, rack null, tags
    )
    _check(msg, 16, expected)


def test_fetch_request_v13_topic_ids() -> None:
    tid = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    msg = FetchRequest(
        max_wait_ms=500, min_bytes=1, cluster_id="c",
        topics=[FetchTopic(topic_id=tid, partitions=[FetchPartition(partition=0, fetch_offset=42, partition_max_bytes=1024)])],
    )
    expected = _hex(
        "ffffffff"  # replica_id -1 (v0-14)
        "000001f4"  # max_wait_ms
        "00000001"  # min_bytes
        "7fffffff"  # max_bytes default
        "00"  # isolation_level
        "00000000"  # session_id
        "ffffffff"  # session_epoch -1
        "02"  # topics: 1
        "00112233445566778899aabbccddeeff"  # topic_id (v13+ replaces the name)
        "02"  # partitions: 1
        "00000000"  # partition
        "ffffffff"  # current_leader_epoch -1
        "000000000000002a"  # fetch_offset 42
        "ffffffff"  # last_fetched_epoch -1
        "ffffffffffffffff"  # log_start_offset -1
        "00000400"  # partition_max_bytes
        "00"  # partition tags
        "00"  # topic tags
        "01"  # forgotten_topics_data: empty
        "01"  # rack_id: ""
        "01 00 02 0263"  # tag buffer: tag 0 (cluster_id), 2 bytes, compact "c"
    )
    _check(msg, 13, expected)


def test_metadata_request_null_vs_empty_topics() -> None:
    all_topics, no_topics = MetadataRequest(topics=None), MetadataRequest(topics=[])
    # v0: an empty list is how a client asks for all topics (null was not allowed yet)
    assert no_topics.encode(0) == _hex("00000000")
    # v1+: null means all topics, empty means none
    _check(all_topics, 1, _hex("ffffffff"))
    _check(no_topics, 1, _hex("00000000"))
    # v4 adds allow_auto_topic_creation (default true)
    _check(all_topics, 4, _hex("ffffffff 01"))
    # v9 flexible: compact array, then allow_auto, include_cluster_ops (v8-10), include_topic_ops, tags
    _check(all_topics, 9, _hex("00 01 00 00 00"))
    _check(no_topics, 9, _hex("01 01 00 00 00"))
    # v11 drops include_cluster_authorized_operations
    _check(no_topics, 11, _hex("01 01 00 00"))
    named = MetadataRequest(topics=[MetadataRequestTopic(name="t")])
    _check(named, 1, _hex("00000001 0001 74"))
    # v10+: each topic is (topic_id, nullable name)
    _check(named, 10, _hex("02" + "00" * 16 + "02 74 00" + "01 00 00 00"))
