"""A log directory whose disk fails takes only its own partitions offline.

The broker runs in this process on a file system that delegates to the real one and can be told
to fail every operation under one log directory with EIO, as a dying disk does; clients talk to
it over TCP. Produce and fetch for the failed directory's partitions answer KAFKA_STORAGE_ERROR
(56), the other directory's keep serving, DescribeLogDirs reports the directory as failed, and a
topic created afterwards goes to the directory still online.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from helpers import free_port, unique_topic
from helpers.raw import Raw
from helpers.recording_fs import RecordingFileSystem
from helpers.wait import wait_until_async

from broker.config import BrokerConfig
from broker.server import BrokerServer
from client import Admin, NewTopic
from protocol.errors import ErrorCode
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.records import build_batch_from_messages
from storage.faults import DyingDisk


def produce(port: int, topic: str, partition: int) -> int:
    conn = Raw(port)
    try:
        resp = conn.request(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[TopicProduceData(
            name=topic, partition_data=[PartitionProduceData(
                index=partition, records=build_batch_from_messages([(None, b"v", [], None)]))])]), 9)
    finally:
        conn.close()
    assert isinstance(resp, ProduceResponse)
    return resp.responses[0].partition_responses[0].error_code


def fetch(port: int, topic: str, partition: int) -> tuple[int, bytes]:
    conn = Raw(port)
    try:
        resp = conn.request(FetchRequest(max_wait_ms=0, min_bytes=0, topics=[FetchTopic(topic=topic, partitions=[
            FetchPartition(partition=partition, fetch_offset=0, partition_max_bytes=1 << 20)])]), 11)
    finally:
        conn.close()
    assert isinstance(resp, FetchResponse)
    p = resp.responses[0].partitions[0]
    return p.error_code, bytes(p.records or b"")


def describe(port: int) -> dict[str, tuple[int, set[tuple[str, int]]]]:
    conn = Raw(port)
    try:
        resp = conn.request(DescribeLogDirsRequest(topics=None), 4)
    finally:
        conn.close()
    assert isinstance(resp, DescribeLogDirsResponse)
    return {r.log_dir: (r.error_code, {(t.name, p.partition_index) for t in r.topics for p in t.partitions})
            for r in resp.results}


@contextlib.asynccontextmanager
async def two_disks(tmp_path: Path) -> AsyncIterator[tuple[BrokerServer, int, Path, Path, DyingDisk]]:
    """A broker with log directories a and b, b on a disk the test can make fail."""
    a, b = tmp_path / "disk-a", tmp_path / "disk-b"
    disk_b = DyingDisk(b)
    port = free_port()
    cfg = BrokerConfig(listen=f"127.0.0.1:{port}", log_dirs=f"{a},{b}",
                       inter_broker_listen=f"127.0.0.1:{free_port()}")
    server = BrokerServer(cfg, fs=RecordingFileSystem(fault=disk_b))
    await server.start()
    try:
        yield server, port, a, b, disk_b
    finally:
        await server.stop()


async def test_a_failed_log_dir_takes_only_its_partitions_offline(tmp_path: Path) -> None:
    async with two_disks(tmp_path) as (server, port, a, b, disk_b):
        topic = unique_topic("dying")
        async with Admin(f"127.0.0.1:{port}") as admin:
            await admin.create_topics([NewTopic(topic, 2, 1)])
        placed = await asyncio.to_thread(describe, port)
        assert (topic, 0) in placed[str(a)][1] and (topic, 1) in placed[str(b)][1]
        for p in (0, 1):
            assert await asyncio.to_thread(produce, port, topic, p) == 0

        disk_b.dead = True
        assert await asyncio.to_thread(produce, port, topic, 1) == ErrorCode.KAFKA_STORAGE_ERROR
        # from now on the partition is offline; the other directory's partition is not
        assert await asyncio.to_thread(produce, port, topic, 1) == ErrorCode.KAFKA_STORAGE_ERROR
        assert (await asyncio.to_thread(fetch, port, topic, 1))[0] == ErrorCode.KAFKA_STORAGE_ERROR
        assert await asyncio.to_thread(produce, port, topic, 0) == 0
        code, records = await asyncio.to_thread(fetch, port, topic, 0)
        assert code == 0 and records
        dirs = await asyncio.to_thread(describe, port)
        assert dirs[str(b)] == (ErrorCode.KAFKA_STORAGE_ERROR, set())
        assert dirs[str(a)][0] == 0 and (topic, 0) in dirs[str(a)][1]

        later = unique_topic("after")
        async with Admin(f"127.0.0.1:{port}") as admin:
            await admin.create_topics([NewTopic(later, 2, 1)])
        dirs = await asyncio.to_thread(describe, port)
        assert {(later, 0), (later, 1)} <= dirs[str(a)][1]
        for p in (0, 1):
            assert await asyncio.to_thread(produce, port, later, p) == 0
        disk_b.dead = False  # the disk answers again: the directory stays offline until a restart, as Kafka's
        assert await asyncio.to_thread(produce, port, topic, 1) == ErrorCode.KAFKA_STORAGE_ERROR


async def test_a_move_whose_destination_fails_stops_and_the_replica_stays_where_it_was(tmp_path: Path) -> None:
    async with two_disks(tmp_path) as (server, port, a, b, disk_b):
        topic = unique_topic("move-to-dying")
        async with Admin(f"127.0.0.1:{port}") as admin:
            await admin.create_topics([NewTopic(topic, 1, 1)])
        assert (topic, 0) in (await asyncio.to_thread(describe, port))[str(a)][1]
        assert await asyncio.to_thread(produce, port, topic, 0) == 0
        disk_b.dead = True
        assert server.topics.alter_log_dir(topic, 0, str(b)) == ErrorCode.NONE  # b has not failed yet
        await wait_until_async(lambda: not server.topics.moves, 10, message="the move to end")
        dirs = await asyncio.to_thread(describe, port)
        assert dirs[str(b)] == (ErrorCode.KAFKA_STORAGE_ERROR, set())
        assert (topic, 0) in dirs[str(a)][1]
        assert await asyncio.to_thread(produce, port, topic, 0) == 0
        code, records = await asyncio.to_thread(fetch, port, topic, 0)
        assert code == 0 and records
        # and a move to a failed directory is refused
        assert server.topics.alter_log_dir(topic, 0, str(b)) == ErrorCode.KAFKA_STORAGE_ERROR
