"""Issue 10: the internal topics read raw, as a lag monitor or Kafka's dump tools read them.

A confluent-kafka consumer group commits offsets and the bundled client commits a transaction;
then librdkafka reads `__consumer_offsets` and `__transaction_state` like any topic
(read_uncommitted) and every record is decoded by the independent reader of Kafka's JSON
definitions (tests/helpers/kafka_json_reader.py) — none may be left undecoded.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from confluent_kafka import Consumer
from helpers import BrokerProcess, unique_topic
from helpers.confluent import QUIET, consume_all, create_topic, produce, topic_partition_count
from helpers.kafka_json_reader import read_record
from helpers.records import Msg

from client import Producer


def _decode_offsets_topic(bootstrap: str) -> list[tuple[str, dict[str, Any], str | None, dict[str, Any] | None]]:
    n = topic_partition_count(bootstrap, "__consumer_offsets")
    assert n, "__consumer_offsets does not exist"
    out = []
    for rec in consume_all(bootstrap, "__consumer_offsets", n, check_watermarks=False):
        assert rec.key is not None, "a __consumer_offsets record without a key"
        key_version = struct.unpack(">h", rec.key[:2])[0]
        kind = "offset" if key_version in (0, 1) else "group" if key_version == 2 else "?"
        assert kind != "?", f"key version {key_version} is not one Kafka's classic coordinator writes"
        _, key = read_record("OffsetCommitKey" if kind == "offset" else "GroupMetadataKey", rec.key)
        value = None
        value_name = "OffsetCommitValue" if kind == "offset" else "GroupMetadataValue"
        if rec.value is not None:
            _, value = read_record(value_name, rec.value)
        out.append((kind, key, value_name if rec.value is not None else None, value))
    return out


def test_consumer_offsets_decode_as_kafkas_records(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic = unique_topic("raw-internal")
    group = f"lag-{uuid.uuid4().hex[:6]}"
    create_topic(bs, topic, 1)
    produce(bs, topic, [Msg(i, b"k%d" % i, b"v%d" % i) for i in range(5)])

    c = Consumer({"bootstrap.servers": bs, "group.id": group, "client.id": "lag-probe",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, **QUIET})
    try:
        c.subscribe([topic])
        seen = 0
        while seen < 5:
            msgs = c.consume(10, 10.0)
            assert msgs, "no records within 10 s"
            seen += len(msgs)
        c.commit(asynchronous=False)
    finally:
        c.close()

    records = _decode_offsets_topic(bs)
    offsets = [(k, v) for kind, k, _, v in records if kind == "offset" and k["group"] == group]
    assert offsets, records
    key, value = offsets[-1]
    assert key == {"group": group, "topic": topic, "partition": 0}
    assert value is not None and value["offset"] == 5 and value["commitTimestamp"] > 0
    groups = [v for kind, k, _, v in records if kind == "group" and k["group"] == group]
    with_members = [v for v in groups if v and v["members"]]
    assert with_members, groups
    g = with_members[-1]
    assert g["protocolType"] == "consumer" and g["generation"] >= 1 and g["leader"]
    assert [m["clientId"] for m in g["members"]] == ["lag-probe"]
    assert groups[-1] is not None and groups[-1]["members"] == []  # written when the consumer left


async def test_transaction_state_decodes_as_kafkas_records(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic = unique_topic("raw-txn")
    create_topic(bs, topic, 2)
    tid = f"raw-{uuid.uuid4().hex[:6]}"
    async with Producer(bs, transactional_id=tid) as p:
        await p.init_transactions()
        async with p.transaction():
            await p.send(topic, b"a", partition=0)
            await p.send(topic, b"b", partition=1)

    n = topic_partition_count(bs, "__transaction_state")
    assert n
    states: list[dict[str, Any]] = []
    for rec in consume_all(bs, "__transaction_state", n, check_watermarks=False):
        assert rec.key is not None
        _, key = read_record("TransactionLogKey", rec.key)
        if key["TransactionalId"] != tid:
            continue
        assert rec.value is not None
        states.append(read_record("TransactionLogValue", rec.value)[1])
    # Empty (InitProducerId), Ongoing (each AddPartitionsToTxn), PrepareCommit, CompleteCommit
    status = [s["TransactionStatus"] for s in states]
    assert status[0] == 0 and status[-2:] == [2, 4] and 1 in status, status
    assert states[0]["TransactionPartitions"] is None
    prepare = states[-2]
    assert {(t["Topic"], q) for t in prepare["TransactionPartitions"] for q in t["PartitionIds"]} == {
        (topic, 0), (topic, 1)}
    assert len({s["ProducerId"] for s in states}) == 1
