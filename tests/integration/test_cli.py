"""`ketch topic ...` against a real broker process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import BrokerProcess


def ketch(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker", *args, "--bootstrap", broker.bootstrap],
                          capture_output=True, text=True, timeout=60)


def test_topic_create_list_delete(broker: BrokerProcess) -> None:
    r = ketch(broker, "topic", "create", "cli-t", "--partitions", "3", "--config", "retention.ms=60000")
    assert r.returncode == 0, r.stderr
    listed = json.loads(ketch(broker, "topic", "list", "--json").stdout)
    assert {"topic": "cli-t", "partitions": 3, "internal": False} in listed
    again = ketch(broker, "topic", "create", "cli-t")
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    bad = ketch(broker, "topic", "create", "cli-bad", "--config", "no.such=1")
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr
    two = ketch(broker, "topic", "create", "cli-rf", "--replication-factor", "2")  # one broker only
    assert two.returncode == 1 and "INVALID_REPLICATION_FACTOR" in two.stderr
    assert ketch(broker, "topic", "create", "cli-rf", "--replication-factor", "1").returncode == 0
    assert ketch(broker, "topic", "elect-leaders", "cli-rf", "--json").stdout.count("ELECTION_NOT_NEEDED") == 1
    assert ketch(broker, "topic", "delete", "cli-t").returncode == 0
    assert all(t["topic"] != "cli-t" for t in json.loads(ketch(broker, "topic", "list", "--json").stdout))


def test_group_list_describe_reset_delete(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    assert ketch(broker, "topic", "create", "cli-g", "--partitions", "2").returncode == 0
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce("cli-g", value=b"%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cli-group", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("cli-g", 0, 3), TopicPartition("cli-g", 1, 4)], asynchronous=False)
    c.close()

    groups = json.loads(ketch(broker, "group", "list", "--json").stdout)
    assert {"group": "cli-group", "state": "Empty", "protocol_type": ""} in groups or any(
        g["group"] == "cli-group" for g in groups)
    d = json.loads(ketch(broker, "group", "describe", "cli-group", "--json").stdout)[0]
    offsets = {(o["partition"], o["committed"], o["end"], o["lag"]) for o in d["offsets"]}
    assert offsets == {(0, 3, 5, 2), (1, 4, 5, 1)}

    r = ketch(broker, "group", "reset-offsets", "cli-group", "--topic", "cli-g", "--to", "earliest", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(ketch(broker, "group", "describe", "cli-group", "--json").stdout)[0]
    assert {(o["partition"], o["committed"]) for o in d["offsets"]} == {(0, 0), (1, 0)}

    assert ketch(broker, "group", "delete", "cli-group").returncode == 0
    missing = ketch(broker, "group", "describe", "cli-group", "--json")
    d = json.loads(missing.stdout)[0] if missing.returncode == 0 else None
    assert d is None or (d["state"] == "Dead" and not d["offsets"])


def test_topic_add_partitions_alter_config_and_configs(broker: BrokerProcess) -> None:
    assert ketch(broker, "topic", "create", "cli-a", "--partitions", "2", "--config", "retention.ms=60000").returncode == 0

    def partitions() -> int:
        listed = json.loads(ketch(broker, "topic", "list", "--json").stdout)
        return next(t["partitions"] for t in listed if t["topic"] == "cli-a")

    def configs() -> dict[str, tuple[str, str]]:
        r = ketch(broker, "topic", "configs", "cli-a", "--json")
        assert r.returncode == 0, r.stderr
        return {c["config"]: (c["value"], c["source"]) for c in json.loads(r.stdout)}

    r = ketch(broker, "topic", "add-partitions", "cli-a", "--partitions", "5", "--validate-only")
    assert r.returncode == 0, r.stderr
    assert partitions() == 2
    r = ketch(broker, "topic", "add-partitions", "cli-a", "--partitions", "5")
    assert r.returncode == 0, r.stderr
    assert partitions() == 5
    fewer = ketch(broker, "topic", "add-partitions", "cli-a", "--partitions", "3")
    assert fewer.returncode == 1 and "INVALID_PARTITIONS" in fewer.stderr and "higher than the requested 3" in fewer.stderr
    missing = ketch(broker, "topic", "add-partitions", "cli-none", "--partitions", "3")
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr

    r = ketch(broker, "topic", "alter-config", "cli-a", "--set", "segment.bytes=1048576", "--set", "max.message.bytes=5000",
              "--delete", "retention.ms")
    assert r.returncode == 0, r.stderr
    c = configs()
    assert c["segment.bytes"] == ("1048576", "topic") and c["max.message.bytes"] == ("5000", "topic")
    assert c["retention.ms"][1] == "default"
    r = ketch(broker, "topic", "alter-config", "cli-a", "--set", "segment.bytes=2048", "--validate-only")
    assert r.returncode == 0, r.stderr
    assert configs()["segment.bytes"] == ("1048576", "topic")
    bad = ketch(broker, "topic", "alter-config", "cli-a", "--set", "retention.ms=soon")
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr and "Not a number" in bad.stderr
    unknown = ketch(broker, "topic", "alter-config", "cli-a", "--set", "no.such=1")
    assert unknown.returncode == 1 and "INVALID_CONFIG" in unknown.stderr
    nothing = ketch(broker, "topic", "alter-config", "cli-a")
    assert nothing.returncode == 1 and "nothing to change" in nothing.stderr
    assert configs()["max.message.bytes"] == ("5000", "topic")


def test_topic_delete_records_and_sizes(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    assert ketch(broker, "topic", "create", "cli-dr", "--partitions", "2").returncode == 0
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        p.produce("cli-dr", value=b"%d" % i, partition=i % 2)
    assert p.flush(30) == 0

    def sizes() -> list[dict[str, object]]:
        r = ketch(broker, "topic", "sizes", "cli-dr", "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    rows = sizes()
    assert [(s["topic"], s["partition"], s["offset_lag"]) for s in rows] == [("cli-dr", 0, 0), ("cli-dr", 1, 0)]
    assert all(isinstance(s["size_bytes"], int) and s["size_bytes"] > 0 for s in rows)
    assert {s["log_dir"] for s in rows} == {os.path.abspath(broker.data_dir)}
    everything = ketch(broker, "topic", "sizes", "--json")
    assert everything.returncode == 0 and {"cli-dr"} <= {s["topic"] for s in json.loads(everything.stdout)}

    r = ketch(broker, "topic", "delete-records", "cli-dr", "--partition", "0", "--before", "4", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"topic": "cli-dr", "partition": 0, "log_start_offset": 4}]
    r = ketch(broker, "topic", "delete-records", "cli-dr", "--before", "-1", "--json")  # every partition
    assert r.returncode == 0, r.stderr
    assert [(x["partition"], x["log_start_offset"]) for x in json.loads(r.stdout)] == [(0, 10), (1, 10)]
    assert sizes() == rows  # inside the one segment: nothing freed yet

    beyond = ketch(broker, "topic", "delete-records", "cli-dr", "--partition", "1", "--before", "11")
    assert beyond.returncode == 1 and "OFFSET_OUT_OF_RANGE" in beyond.stderr
    missing = ketch(broker, "topic", "delete-records", "cli-none", "--before", "1")
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr


def test_group_delete_offsets(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from helpers import wait_until

    for t in ("cli-d", "cli-s"):
        assert ketch(broker, "topic", "create", t, "--partitions", "3").returncode == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cli-od", "enable.auto.commit": False,
                  "log_level": 3})
    c.commit(offsets=[TopicPartition(t, p, 7) for t in ("cli-d", "cli-s") for p in range(3)], asynchronous=False)

    def committed() -> set[tuple[str, int]]:
        d = json.loads(ketch(broker, "group", "describe", "cli-od", "--json").stdout)[0]
        return {(o["topic"], o["partition"]) for o in d["offsets"]}

    r = ketch(broker, "group", "delete-offsets", "cli-od", "--topic", "cli-d", "--partition", "0",
              "--partition", "2", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"topic": "cli-d", "partition": 0, "status": "deleted"},
                                    {"topic": "cli-d", "partition": 2, "status": "deleted"}]
    assert committed() == {("cli-d", 1)} | {("cli-s", p) for p in range(3)}

    # a member subscribed to cli-s: its offsets are refused, the rest of the topic list goes
    c.subscribe(["cli-s"])
    wait_until(lambda: c.poll(0.2) is None and bool(c.assignment()), timeout=60, interval=0,
               message="the consumer to get its partitions")
    try:
        kept = ketch(broker, "group", "delete-offsets", "cli-od", "--topic", "cli-s")
        assert kept.returncode == 1 and "GROUP_SUBSCRIBED_TO_TOPIC" in kept.stdout
        assert "cli-s-0: GROUP_SUBSCRIBED_TO_TOPIC" in kept.stderr
        r = ketch(broker, "group", "delete-offsets", "cli-od", "--topic", "cli-d")  # every partition
        assert r.returncode == 0, r.stderr
        assert committed() == {("cli-s", p) for p in range(3)}
    finally:
        c.close()

    missing = ketch(broker, "group", "delete-offsets", "cli-nobody", "--topic", "cli-d")
    assert missing.returncode == 1 and "GROUP_ID_NOT_FOUND" in missing.stderr
    no_topic = ketch(broker, "group", "delete-offsets", "cli-od", "--topic", "cli-none")
    assert no_topic.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in no_topic.stderr
