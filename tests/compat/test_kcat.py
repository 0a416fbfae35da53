"""kcat (the Debian CLI, librdkafka 2.0.2 — an older librdkafka than confluent-kafka's) against Ketch."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from helpers import BrokerProcess, Consumed, Msg, make_messages, unique_topic, verify_round_trip
from helpers.confluent import create_topic

pytestmark = pytest.mark.compat

PARTITIONS = 6
N = 10_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
KEY_DELIM = "\t"


def kcat(*args: str, stdin: bytes | None = None, timeout: float = 120) -> bytes:
    exe = shutil.which("kcat")
    assert exe is not None, "kcat is not installed: `make system-deps` (apt-get install kcat)"
    proc = subprocess.run([exe, *args], input=stdin, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, (
        f"kcat {' '.join(args)} exited {proc.returncode}\nstderr:\n{proc.stderr.decode(errors='replace')[-3000:]}"
    )
    # kcat reports per-message delivery failures on stderr but may still exit 0 for some of them
    assert b"Delivery failed" not in proc.stderr, proc.stderr.decode(errors="replace")[-3000:]
    return proc.stdout


def kcat_metadata(bootstrap: str, topic: str) -> dict:
    return json.loads(kcat("-L", "-J", "-b", bootstrap, "-t", topic, timeout=30))


def kcat_produce(bootstrap: str, topic: str, msgs: list[Msg], *extra: str) -> None:
    lines = b"".join(m.key + KEY_DELIM.encode() + m.value + b"\n" for m in msgs)
    assert lines.count(b"\n") == len(msgs) and lines.count(KEY_DELIM.encode()) == len(msgs)
    kcat(
        "-P",
        "-b",
        bootstrap,
        "-t",
        topic,
        "-K",
        KEY_DELIM,
        "-X",
        "acks=all",
        "-X",
        "linger.ms=5",
        *extra,
        stdin=lines,
    )


def kcat_consume(bootstrap: str, topic: str, *extra: str) -> list[Consumed]:
    """`kcat -C -e` from the beginning; length-prefixed output format so any bytes parse unambiguously."""
    out = kcat(
        "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
        "-f", "%p %o %K %S\n%k%s\n", *extra,
    )  # fmt: skip
    recs: list[Consumed] = []
    pos = 0
    while pos < len(out):
        nl = out.index(b"\n", pos)
        p, o, klen, vlen = (int(x) for x in out[pos:nl].split(b" "))
        pos = nl + 1
        key = None if klen < 0 else out[pos : pos + klen]
        pos += max(klen, 0)
        value = None if vlen < 0 else out[pos : pos + vlen]
        pos += max(vlen, 0)
        assert out[pos : pos + 1] == b"\n", f"unparseable kcat output near byte {pos}"
        pos += 1
        recs.append(Consumed(p, o, key, value))
    return recs


def partitions_of(md: dict, topic: str) -> list[dict]:
    topics = {t["topic"]: t for t in md["topics"]}
    assert topic in topics, f"kcat -L does not list {topic}: {md}"
    t = topics[topic]
    assert not t.get("error"), f"metadata error for {topic}: {t}"
    return t["partitions"]


def test_kcat_lists_topic_with_its_partitions(module_broker: BrokerProcess) -> None:
    name = unique_topic("kcat-list")
    create_topic(module_broker.bootstrap, name, PARTITIONS)
    md = kcat_metadata(module_broker.bootstrap, name)
    parts = partitions_of(md, name)
    assert sorted(p["partition"] for p in parts) == list(range(PARTITIONS))
    broker_ids = {b["id"] for b in md["brokers"]}
    assert all(p["leader"] in broker_ids for p in parts), md
    assert f"{module_broker.host}:{module_broker.port}" in {b["name"] for b in md["brokers"]}, md


@pytest.mark.parametrize("idempotence", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(module_broker: BrokerProcess, codec: str, idempotence: bool) -> None:
    name = unique_topic(f"kcat-{codec}-{idempotence}")
    create_topic(module_broker.bootstrap, name, PARTITIONS)
    msgs = make_messages(N, seed=CODECS.index(codec) * 2 + idempotence, text=True)
    extra = ["-z", codec, "-X", f"enable.idempotence={str(idempotence).lower()}"]
    kcat_produce(module_broker.bootstrap, name, msgs, *extra)
    consumed = kcat_consume(module_broker.bootstrap, name)  # librdkafka default: read_committed
    verify_round_trip(msgs, consumed, partitions=PARTITIONS)
    assert len(partitions_of(kcat_metadata(module_broker.bootstrap, name), name)) == PARTITIONS


def test_read_uncommitted_consumer(module_broker: BrokerProcess) -> None:
    name = unique_topic("kcat-read-uncommitted")
    create_topic(module_broker.bootstrap, name, PARTITIONS)
    msgs = make_messages(2_000, seed=5, text=True)
    kcat_produce(module_broker.bootstrap, name, msgs)
    consumed = kcat_consume(module_broker.bootstrap, name, "-X", "isolation.level=read_uncommitted")
    verify_round_trip(msgs, consumed, partitions=PARTITIONS)


def test_auto_created_topic(broker_factory) -> None:
    """With auto-creation on, producing to an unknown topic creates it; kcat -L then lists it."""
    b = broker_factory(env={"KETCH_AUTO_CREATE_TOPICS": "true", "KETCH_NUM_PARTITIONS": "4"})
    name = unique_topic("kcat-auto")
    msgs = make_messages(1_000, seed=3, text=True)
    kcat_produce(b.bootstrap, name, msgs)
    parts = partitions_of(kcat_metadata(b.bootstrap, name), name)
    assert sorted(p["partition"] for p in parts) == [0, 1, 2, 3], "num_partitions setting not applied"
    verify_round_trip(msgs, kcat_consume(b.bootstrap, name), partitions=4)
