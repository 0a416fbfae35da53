"""The Prometheus endpoint of a real broker: counters follow what clients did, gauges follow the
logs, the groups and the transactions, and bad HTTP input gets a 4xx without disturbing the broker."""

from __future__ import annotations

import asyncio
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from helpers import BrokerProcess, free_port, unique_topic, wait_until
from helpers.metrics import Metrics

from client import Admin, Consumer, Producer

HOST = "127.0.0.1"
@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Metrics]]:
    port = free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("metered") / "data", env={"KETCH_METRICS_LISTEN": f"{HOST}:{port}"},
                      log_path=tmp_path_factory.mktemp("metered-log") / "broker.log")
    b.start()
    yield b, Metrics(port)
    b.stop()


async def _produce(bs: str, topic: str, n: int) -> None:
    async with Producer(bs, enable_idempotence=True, linger_ms=5) as p:
        for i in range(n):
            await p.send(topic, b"v%d" % i, partition=i % 2)
        await p.flush()


def test_counters_and_partition_gauges_follow_produce(metered: tuple[BrokerProcess, Metrics]) -> None:
    b, m = metered
    topic = unique_topic("metrics-produce")
    before = m.scrape()
    asyncio.run(_create(b.bootstrap, topic, 2))
    asyncio.run(_produce(b.bootstrap, topic, 1000))
    after = m.scrape()

    def delta(name: str, **labels: str) -> float:
        key = (name, frozenset(labels.items()))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert delta("ketch_produced_records_total") == 1000
    assert delta("ketch_produced_batches_total") >= 2
    assert delta("ketch_requests_total", api="Produce") >= 1
    assert delta("ketch_request_duration_seconds_count", api="Produce") == delta("ketch_requests_total", api="Produce")
    assert delta("ketch_request_duration_seconds_sum", api="Produce") > 0
    assert delta("ketch_network_received_bytes_total") > 1000 * 2
    assert delta("ketch_network_sent_bytes_total") > 0
    assert delta("ketch_connections_accepted_total") >= 2  # admin + producer
    for stalls in ("ketch_event_loop_stalls_total", "ketch_event_loop_stalls_100ms_total"):
        assert (stalls, frozenset()) in after  # loop_watch.py; counts tested in unit
    for p in (0, 1):
        labels = {"topic": topic, "partition": str(p)}
        assert after[("ketch_partition_log_end_offset", frozenset(labels.items()))] == 500
        assert after[("ketch_partition_high_watermark", frozenset(labels.items()))] == 500
        assert after[("ketch_partition_last_stable_offset", frozenset(labels.items()))] == 500
        assert after[("ketch_partition_size_bytes", frozenset(labels.items()))] > 500 * 2
        assert after[("ketch_partition_segments", frozenset(labels.items()))] == 1
    assert delta("ketch_topics") == 1 and delta("ketch_partitions") == 2


async def _create(bs: str, topic: str, partitions: int) -> None:
    async with Admin(bs) as admin:
        await admin.create_topic(topic, partitions)


def test_transactions_and_the_lso_they_hold_back(metered: tuple[BrokerProcess, Metrics]) -> None:
    b, m = metered
    topic = unique_topic("metrics-txn")
    tid = unique_topic("metrics-tx")
    labels = frozenset({"topic": topic, "partition": "0"}.items())
    asyncio.run(_create(b.bootstrap, topic, 1))
    commits = m.value("ketch_transactions_completed_total", result="commit")
    aborts = m.value("ketch_transactions_completed_total", result="abort")
    commit_markers = m.value("ketch_transaction_markers_written_total", result="commit")

    async def run() -> None:
        async with Producer(b.bootstrap, transactional_id=tid) as p:
            await p.init_transactions()
            await p.begin_transaction()
            for i in range(10):
                await p.send(topic, b"c%d" % i, partition=0)
            await p.commit_transaction()
            await p.begin_transaction()
            for i in range(5):
                await p.send(topic, b"o%d" % i, partition=0)
            await p.flush()
            # open: the 5 records are below the high watermark but above the LSO
            s = await asyncio.to_thread(m.scrape)
            assert s[("ketch_partition_high_watermark", labels)] - s[("ketch_partition_last_stable_offset", labels)] == 5
            assert s[("ketch_transactional_ids", frozenset({("state", "Ongoing")}))] >= 1
            await p.abort_transaction()

    asyncio.run(run())
    # completion (markers + the Complete* record) runs after EndTxn has been answered
    wait_until(lambda: m.value("ketch_transactions_completed_total", result="abort") == aborts + 1,
               timeout=30, message="the aborted transaction to be completed")
    assert m.value("ketch_transactions_completed_total", result="commit") == commits + 1
    assert m.value("ketch_transaction_markers_written_total", result="commit") >= commit_markers + 1
    s = m.scrape()
    assert s[("ketch_partition_last_stable_offset", labels)] == s[("ketch_partition_high_watermark", labels)] == 17


def test_groups_are_counted_by_state(metered: tuple[BrokerProcess, Metrics]) -> None:
    b, m = metered
    topic = unique_topic("metrics-group")
    group = unique_topic("metrics-g")
    asyncio.run(_create(b.bootstrap, topic, 1))

    async def run() -> None:
        async with Consumer(b.bootstrap, group_id=group, auto_offset_reset="earliest") as c:
            c.subscribe([topic])
            await c.getmany(timeout_ms=100)

            def stable() -> bool:
                return m.value("ketch_groups", state="Stable") >= 1 and m.value("ketch_group_members") >= 1

            await asyncio.to_thread(wait_until, stable, timeout=60, message="the group to be Stable")

    asyncio.run(run())
    assert m.value("ketch_requests_total", api="JoinGroup") >= 1
    assert m.value("ketch_requests_total", api="SyncGroup") >= 1


def _raw_http(port: int, data: bytes) -> bytes:
    with socket.create_connection((HOST, port), timeout=10) as s:
        s.sendall(data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_bad_http_input_gets_4xx_and_the_broker_keeps_serving(metered: tuple[BrokerProcess, Metrics]) -> None:
    b, m = metered
    port = int(m.url.split(":")[2].split("/")[0])
    assert _raw_http(port, b"\x00\xff garbage\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert _raw_http(port, b"GET /metrics SPDY/9\r\n\r\n").startswith(b"HTTP/1.1 505 ")
    assert _raw_http(port, b"POST /metrics HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405 ")
    assert _raw_http(port, b"GET /elsewhere HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 404 ")
    assert _raw_http(port, b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20_000 + b"\r\n\r\n").startswith(b"HTTP/1.1 431 ")
    head = _raw_http(port, b"HEAD /metrics HTTP/1.1\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and head.endswith(b"\r\n\r\n")
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"http://{HOST}:{port}/nope", timeout=10)
    # a client half-sending and going away
    with socket.create_connection((HOST, port), timeout=10) as s:
        s.sendall(b"GET /met")
    assert ("ketch_connections", frozenset()) in m.scrape()  # the endpoint still answers
    assert b.is_running


def test_refused_kafka_connections_are_counted_by_reason(metered: tuple[BrokerProcess, Metrics]) -> None:
    b, m = metered
    before = m.value("ketch_connections_aborted_total", reason="invalid frame size")
    with socket.create_connection((HOST, b.port), timeout=10) as s:
        s.sendall((2**31 - 1).to_bytes(4, "big"))  # a frame size far over socket_request_max_bytes
        assert s.recv(16) == b""  # the broker hangs up
    assert m.value("ketch_connections_aborted_total", reason="invalid frame size") == before + 1


def test_the_metadata_quorum_and_the_registered_brokers(metered: tuple[BrokerProcess, Metrics]) -> None:
    _b, m = metered
    wait_until(lambda: m.value("ketch_brokers", state="alive") == 1, timeout=15, message="this broker registered")
    assert m.value("ketch_brokers", state="fenced") == 0
    assert m.value("ketch_quorum_leader") == 1 and m.value("ketch_quorum_is_leader") == 1
    assert m.value("ketch_quorum_epoch") >= 1 and m.value("ketch_quorum_high_watermark") >= 2
