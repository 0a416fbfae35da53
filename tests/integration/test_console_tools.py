"""Issue 10: `ketch produce`, `ketch consume` and `ketch topic describe` as a user runs them —
real subprocesses against a real broker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO_ROOT, BrokerProcess, unique_topic
from helpers.consume import read_records

from client import Admin, Producer

LINES = 100_000


def ketch(*args: str, stdin: bytes | None = None, timeout: float = 300) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "broker", *args], cwd=REPO_ROOT, input=stdin, capture_output=True,
                          timeout=timeout)


def ok(proc: subprocess.CompletedProcess[bytes]) -> subprocess.CompletedProcess[bytes]:
    assert proc.returncode == 0, proc.stderr.decode()
    return proc


async def create(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(topic, partitions, config=configs or {})


def _describe(bootstrap: str, topic: str) -> dict:  # type: ignore[type-arg]
    return json.loads(ok(ketch("topic", "describe", topic, "--bootstrap", bootstrap, "--json")).stdout)


@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "transactional"])
async def test_100k_lines_with_keys_and_headers_round_trip(module_broker: BrokerProcess, tmp_path: Path,
                                                           transactional: bool) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("console")
    await create(bs, topic, 3)
    lines = [f"key-{i}\tvalue {i} ü" for i in range(LINES)]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n")
    extra = ["--transactional-id", unique_topic("console-tx"), "--batch", "7000"] if transactional else []
    produced = ok(ketch("produce", topic, "--bootstrap", bs, "--file", str(src), "--key-separator", "\t",
                        "--header", "src=console", "--header", "n=1", *extra))
    assert f"{LINES} lines acknowledged".encode() in produced.stderr
    if transactional:
        assert b"in 15 transactions" in produced.stderr  # 14 of 7000 lines and one of 2000

    isolation = "read_committed" if transactional else "read_uncommitted"
    out = ok(ketch("consume", topic, "--bootstrap", bs, "--from-beginning", "--max-messages", str(LINES),
                   "--isolation-level", isolation, "--format", "{key}\\t{value}\\t{headers}"))
    got = out.stdout.decode().splitlines()
    assert sorted(got) == sorted(f"{line}\tsrc=console,n=1" for line in lines)
    assert b"Processed a total of 100000 messages" in out.stderr

    d = _describe(bs, topic)
    ends = [p["log_end"] for p in d["partitions"]]
    markers = 15 if transactional else 0  # one commit marker per transaction in each partition it touched
    assert sum(ends) - sum(p["log_start"] for p in d["partitions"]) in (
        range(LINES, LINES + 3 * markers + 1))
    assert all(p["lso"] == p["log_end"] for p in d["partitions"])  # nothing left open


async def test_a_line_over_max_message_bytes_stops_with_the_earlier_lines_kept(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("console-big")
    await create(bs, topic, 1, {"max.message.bytes": "2000"})
    lines = [f"small {i}".encode() for i in range(50)] + [b"x" * 5000] + [f"after {i}".encode() for i in range(10)]
    proc = ketch("produce", topic, "--bootstrap", bs, stdin=b"\n".join(lines) + b"\n")
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "line 51" in err and "MESSAGE_TOO_LARGE" in err, err
    assert "50 lines acknowledged" in err
    assert [r.value for r in await read_records(bs, topic, 1)] == lines[:50]


async def test_a_transactional_run_aborts_only_the_open_transaction(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("console-big-tx")
    await create(bs, topic, 1, {"max.message.bytes": "2000"})
    lines = [f"line {i}".encode() for i in range(50)] + [b"y" * 5000]
    proc = ketch("produce", topic, "--bootstrap", bs, "--transactional-id", unique_topic("tx"), "--batch", "20",
                 stdin=b"\n".join(lines) + b"\n")
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "line 51" in err and "40 lines acknowledged in 2 transactions" in err, err
    assert "open transaction of 10 lines was aborted" in err
    assert [r.value for r in await read_records(bs, topic, 1, "read_committed")] == lines[:40]


def test_a_missing_topic_with_auto_create_off(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(env={"KETCH_AUTO_CREATE_TOPICS": "false"})
    proc = ketch("produce", "no-such-topic", "--bootstrap", b.bootstrap, "--max-block-ms", "2000", stdin=b"a\nb\n")
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "line 1" in err and "no-such-topic" in err and "UNKNOWN_TOPIC_OR_PARTITION" in err, err
    consumed = ketch("consume", "no-such-topic", "--bootstrap", b.bootstrap, "--max-messages", "1")
    assert consumed.returncode == 1 and b"no-such-topic" in consumed.stderr


def test_a_line_without_the_key_separator_is_an_error(module_broker: BrokerProcess) -> None:
    topic = unique_topic("console-sep")
    proc = ketch("produce", topic, "--bootstrap", module_broker.bootstrap, "--key-separator", ":",
                 stdin=b"k:v\nno separator\n")
    assert proc.returncode == 1 and b"line 2: no key separator" in proc.stderr, proc.stderr


async def test_consume_with_a_group_continues_where_it_committed_and_prints_json(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("console-group")
    await create(bs, topic, 1)
    async with Producer(bs) as p:
        for i in range(30):
            await p.send(topic, f"v{i}".encode(), key=f"k{i}".encode(), headers=[("h", b"x")])
        await p.flush()
    group = unique_topic("console-g")
    first = ok(ketch("consume", topic, "--bootstrap", bs, "--group", group, "--from-beginning",
                     "--max-messages", "10", "--json"))
    rows = [json.loads(line) for line in first.stdout.decode().splitlines()]
    assert [(r["offset"], r["key"], r["value"], r["headers"]) for r in rows] == [
        (i, f"k{i}", f"v{i}", [["h", "x"]]) for i in range(10)]
    second = ok(ketch("consume", topic, "--bootstrap", bs, "--group", group, "--max-messages", "5",
                      "--format", "{partition}:{offset}"))
    assert second.stdout.decode().splitlines() == [f"0:{i}" for i in range(10, 15)]


async def test_topic_describe_shows_offsets_lso_and_overrides(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("console-describe")
    await create(bs, topic, 2, {"retention.ms": "3600000"})
    async with Producer(bs) as plain:
        await plain.send_and_wait(topic, b"plain", partition=0)
    async with Producer(bs, transactional_id=unique_topic("open-tx")) as p:
        await p.init_transactions()
        await p.begin_transaction()
        await p.send_and_wait(topic, b"open", partition=1)
        d = _describe(bs, topic)
        assert d["configs"] == {"retention.ms": "3600000"}
        p0, p1 = d["partitions"]
        assert (p0["log_start"], p0["log_end"], p0["lso"]) == (0, 1, 1)
        assert (p1["log_start"], p1["log_end"], p1["lso"]) == (0, 1, 0)  # the open transaction holds the LSO
        assert p0["replicas"] == [p0["leader"]] and p0["isr"] == [p0["leader"]]
        table = ok(ketch("topic", "describe", topic, "--bootstrap", bs)).stdout.decode()
        assert "Configs: retention.ms=3600000" in table and "LSO" in table
        await p.abort_transaction()
