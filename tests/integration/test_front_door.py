"""The front door on a real broker process (docs/security.md "Front-door limits and fuzzing"): the
connection caps, the idle timeout and the request memory pool, each against real sockets."""

from __future__ import annotations

import socket
import struct
import time

from helpers import BrokerProcess
from helpers.raw import Raw
from helpers.wait import wait_until

from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.records import build_batch_from_messages

MIB = 1024 * 1024


def _answers(port: int) -> bool:
    c = Raw(port)
    try:
        resp = c.request(ApiVersionsRequest(), 0)
        return isinstance(resp, ApiVersionsResponse) and resp.error_code == 0
    finally:
        c.close()


def _closed_by_broker(c: Raw) -> bool:
    """The broker closed this connection: a request on it gets no answer, only the end."""
    try:
        c.send(ApiVersionsRequest(), 0)
    except OSError:
        return True
    return c.recv_frame() is None


def test_the_n_plus_first_connection_from_one_address_is_closed_but_brokers_listener_is_not_capped(
        broker_factory: object) -> None:
    b: BrokerProcess = broker_factory(env={"KETCH_MAX_CONNECTIONS_PER_IP": "3"})  # type: ignore[operator]
    wait_until(lambda: _answers(b.port), message="the broker to serve")  # the readiness probe's connection gone
    held = [Raw(b.port) for _ in range(3)]
    for c in held:
        assert isinstance(c.request(ApiVersionsRequest(), 0), ApiVersionsResponse)
    extra = Raw(b.port)
    assert _closed_by_broker(extra)
    extra.close()
    assert "too many connections from one address" in b.log_text()
    brokers = [Raw(b.inter_broker_port) for _ in range(5)]  # the inter-broker listener: never capped
    assert all(isinstance(c.request(ApiVersionsRequest(), 0), ApiVersionsResponse) for c in brokers)
    held.pop().close()
    wait_until(lambda: _answers(b.port), message="a place to free up once one connection closed")
    for c in held + brokers:
        c.close()


def test_an_idle_connection_is_closed_and_a_talking_one_is_not(broker_factory: object) -> None:
    b: BrokerProcess = broker_factory(env={"KETCH_CONNECTIONS_MAX_IDLE_MS": "1500"})  # type: ignore[operator]
    quiet, talking = Raw(b.port), Raw(b.port)
    assert isinstance(quiet.request(ApiVersionsRequest(), 0), ApiVersionsResponse)
    opened = time.monotonic()
    quiet.sock.settimeout(20)
    while time.monotonic() - opened < 3.0:  # twice the timeout, one request every 300 ms
        assert isinstance(talking.request(ApiVersionsRequest(), 0), ApiVersionsResponse)
        time.sleep(0.3)  # the client's pace, not synchronisation
    assert quiet.recv_frame() is None  # closed (long before the 20 s socket timeout)
    assert "closing connection: idle" in b.log_text()
    assert isinstance(talking.request(ApiVersionsRequest(), 0), ApiVersionsResponse)
    quiet.close()
    talking.close()


def _push(socks: list[socket.socket], data: list[bytes], seconds: float) -> None:
    """Write each socket's bytes without blocking until all are written or `seconds` pass (a
    broker that stopped reading leaves the rest unsent: that is the point)."""
    sent = [0] * len(socks)
    for s in socks:
        s.setblocking(False)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(n < len(d) for n, d in zip(sent, data, strict=True)):
        progress = False
        for i, s in enumerate(socks):
            if sent[i] < len(data[i]):
                try:
                    n = s.send(data[i][sent[i]:sent[i] + MIB])
                    sent[i] += n
                    progress = progress or n > 0
                except BlockingIOError:
                    pass
        if not progress:
            time.sleep(0.01)  # the kernel's buffers are full; the client waits as a client would


def test_large_requests_from_many_connections_wait_for_memory_instead_of_growing_it(broker_factory: object) -> None:
    """Twelve connections each start a 16 MiB request and stall (slow clients, or an attacker):
    without a pool the broker buffered all of them (~190 MiB); with an 8 MiB pool it reads one
    (alone in the pool, admitted whole) and stops reading the others. It still answers, and a
    flood of real 1 MiB produce requests is served within the bound once the stalled ones go."""
    b: BrokerProcess = broker_factory(env={  # type: ignore[operator]
        "KETCH_QUEUED_MAX_REQUEST_BYTES": str(8 * MIB), "KETCH_CONNECTION_MAX_REQUEST_BYTES": str(2 * MIB),
        "KETCH_SOCKET_REQUEST_MAX_BYTES": str(20 * MIB), "KETCH_MESSAGE_MAX_BYTES": str(2 * MIB)})
    c = Raw(b.port)
    resp = c.request(CreateTopicsRequest(topics=[CreatableTopic(name="flood", num_partitions=1, replication_factor=1)],
                                         timeout_ms=5000), 4)
    assert isinstance(resp, CreateTopicsResponse) and resp.topics[0].error_code == 0
    base = b.rss_kib()
    size = 16 * MIB
    stalled = [socket.create_connection(("127.0.0.1", b.port)) for _ in range(12)]
    _push(stalled, [struct.pack(">i", size) + b"\x00" * (size - 64)] * len(stalled), seconds=8.0)
    grown_mib = (b.rss_kib() - base) / 1024
    assert grown_mib < 60, f"the broker's RSS grew {grown_mib:.0f} MiB for requests it should not have read"
    assert _answers(b.port)
    for s in stalled:
        s.close()

    batch = build_batch_from_messages([(None, b"x" * (MIB - 200), [], None)])
    produce = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[TopicProduceData(
        name="flood", partition_data=[PartitionProduceData(index=0, records=batch)])])
    flooders = [Raw(b.port) for _ in range(8)]
    peak = b.rss_kib()
    for _ in range(5):  # 8 connections x 8 pipelined 1 MiB requests, answers read only at the end
        for f in flooders:
            f.send_pipelined([(produce, 7)] * 8)
        peak = max(peak, b.rss_kib())
    for f in flooders:
        for _ in range(40):
            _, r = f.receive(ProduceRequest, 7)
            assert isinstance(r, ProduceResponse) and r.responses[0].partition_responses[0].error_code == 0
        f.close()
    assert (peak - base) / 1024 < 120, f"RSS grew {(peak - base) / 1024:.0f} MiB under the produce flood"
    assert _answers(b.port)


def test_a_client_that_does_not_read_its_answers_is_not_read_either(broker_factory: object) -> None:
    """Fetches of a 1 MiB batch, sent one every few milliseconds and never read: the answers used to
    pile up in the broker's write buffer (~150 MiB); now reading stops while the buffer is full,
    and every answer still comes once the client reads."""
    b: BrokerProcess = broker_factory(env={"KETCH_MESSAGE_MAX_BYTES": str(2 * MIB)})  # type: ignore[operator]
    c = Raw(b.port)
    resp = c.request(CreateTopicsRequest(topics=[CreatableTopic(name="big", num_partitions=1, replication_factor=1)],
                                         timeout_ms=5000), 4)
    assert isinstance(resp, CreateTopicsResponse) and resp.topics[0].error_code == 0
    batch = build_batch_from_messages([(None, b"y" * (MIB - 200), [], None)])
    r = c.request(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[TopicProduceData(
        name="big", partition_data=[PartitionProduceData(index=0, records=batch)])]), 7)
    assert isinstance(r, ProduceResponse) and r.responses[0].partition_responses[0].error_code == 0
    base = b.rss_kib()
    fetch = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=4 * MIB, topics=[FetchTopic(
        topic="big", partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=4 * MIB)])])
    reader = Raw(b.port)
    reader.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    reader.sock.settimeout(0.05)
    n = 0
    peak = base
    for _ in range(150):
        try:
            reader.send(fetch, 11)
            n += 1
        except TimeoutError:
            break  # our own send buffer is full: the broker is not reading us any more
        time.sleep(0.005)  # the client's pace
        peak = max(peak, b.rss_kib())
    grown_mib = (peak - base) / 1024
    assert grown_mib < 40, f"RSS grew {grown_mib:.0f} MiB holding answers nobody read ({n} fetches sent)"
    reader.sock.settimeout(30)
    for _ in range(n):
        reader.receive(FetchRequest, 11)
    assert _answers(b.port)
    reader.close()
    c.close()
