"""The bundled client's Admin against a real Ketch broker: delete_records, describe_log_dirs,
describe_cluster, delete_group_offsets, describe_producers, and abort_transaction of a genuinely
hanging transaction.

The transaction hangs the way it does in production: a transactional producer process with a long
transaction timeout is SIGKILLed in the middle of its transaction. Its records hold the partition's
last stable offset back, so read_committed consumers see nothing written after them, until an
operator finds the producer with describe_producers and writes the ABORT marker with
abort_transaction (what `kafka-transactions.sh abort` does).
"""

from __future__ import annotations

import asyncio
import sys

import pytest
from helpers import REPO_ROOT, BrokerProcess, unique_topic

from client import (
    Admin,
    BrokerResponseError,
    Consumer,
    KafkaClientError,
    Producer,
    TopicPartition,
    UnknownTopicError,
    UnsupportedVersionError,
)
from protocol.errors import ErrorCode
from protocol.messages.describe_cluster import DescribeClusterRequest

HANGING_PRODUCER = """
import asyncio, sys
from client import Producer

async def main(bootstrap: str, topic: str, transactional_id: str) -> None:
    p = Producer(bootstrap, transactional_id=transactional_id, transaction_timeout_ms=600_000)
    await p.start()
    await p.init_transactions()
    await p.begin_transaction()
    for i in range(10):
        await p.send(topic, b"hanging-%d" % i, partition=0)
    await p.flush()
    print(p.txn.producer_id, p.txn.producer_epoch, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until it is killed

asyncio.run(main(*sys.argv[1:]))
"""


async def start_hanging_transaction(bootstrap: str, topic: str, transactional_id: str) -> tuple[int, int]:
    """Run a producer process into the middle of a transaction, SIGKILL it; its (id, epoch)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HANGING_PRODUCER, bootstrap, topic, transactional_id, cwd=REPO_ROOT,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line, "the producer process ended before its transaction was open"
        pid, epoch = (int(x) for x in line.split())
    finally:
        proc.kill()
        await proc.wait()
    return pid, epoch


async def test_describe_producers_and_abort_a_hanging_transaction(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic, tid = unique_topic("hanging"), unique_topic("tx")
    tp = TopicPartition(topic, 0)
    async with Admin(bs) as admin:
        await admin.create_topic(topic, 1)
    pid, epoch = await start_hanging_transaction(bs, topic, tid)
    async with Producer(bs) as p:  # written after the open transaction: held back at read_committed
        for i in range(20):
            await p.send(topic, b"after-%d" % i, partition=0)
        await p.flush()

    async with Consumer(bs, isolation_level="read_committed", auto_offset_reset="earliest") as reader, \
            Consumer(bs, auto_offset_reset="earliest") as uncommitted:
        reader.assign([tp])
        uncommitted.assign([tp])
        assert (await uncommitted.end_offsets([tp]))[tp] == 30
        assert (await reader.end_offsets([tp]))[tp] == 0  # the last stable offset is stuck at the transaction
        assert await reader.getmany(timeout_ms=300) == {}  # nothing is readable past it

        async with Admin(bs) as admin:
            states = {s.producer_id: s for s in await admin.describe_producers(tp)}
            assert len(states) == 2 and pid in states
            hanging = states.pop(pid)
            assert (hanging.producer_epoch, hanging.current_txn_start_offset, hanging.last_sequence) == (epoch, 0, 9)
            (plain,) = states.values()  # the idempotent producer: no transaction, 20 records
            assert (plain.producer_epoch, plain.current_txn_start_offset, plain.last_sequence) == (0, -1, 19)
            described = (await admin.describe_transactions([tid]))[tid]
            assert described.state == "Ongoing" and tp in described.partitions and described.timeout_ms == 600_000

        async with Admin(bs) as admin:  # markers are refused on the client listener
            with pytest.raises(BrokerResponseError) as refused:
                await admin.abort_transaction(tp, hanging.producer_id, hanging.producer_epoch,
                                              hanging.coordinator_epoch)
            assert refused.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        async with Admin(broker.inter_broker_bootstrap) as admin:
            await admin.abort_transaction(tp, hanging.producer_id, hanging.producer_epoch, hanging.coordinator_epoch)
            assert all(s.current_txn_start_offset == -1 for s in await admin.describe_producers(tp))

        assert (await reader.end_offsets([tp]))[tp] == 31  # 10 aborted, 20 plain, the ABORT marker
        values: list[bytes | None] = []

        async def read_on() -> None:
            while len(values) < 20:
                values.extend(r.value for r in (await reader.getmany(timeout_ms=500)).get(tp, []))

        await asyncio.wait_for(read_on(), 30)  # the same consumer moves on, past the aborted records
        assert values == [b"after-%d" % i for i in range(20)]
        assert await reader.position(tp) == 31


async def produce(bs: str, topic: str, partition: int, n: int) -> None:
    async with Producer(bs) as p:
        for i in range(n):
            await p.send(topic, b"v-%d" % i, partition=partition)
        await p.flush()


async def test_delete_records_moves_the_low_watermark(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("delete-records")
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    async with Admin(bs) as admin:
        await admin.create_topic(topic, 2)
        await produce(bs, topic, 0, 10)
        await produce(bs, topic, 1, 4)
        assert await admin.delete_records({tp0: 6, tp1: -1}) == {tp0: 6, tp1: 4}  # -1: the high watermark
    async with Consumer(bs, auto_offset_reset="earliest") as c:
        c.assign([tp0, tp1])
        assert await c.beginning_offsets([tp0, tp1]) == {tp0: 6, tp1: 4}
        got: list[bytes | None] = []
        while len(got) < 4:
            got.extend(r.value for r in (await c.getmany(timeout_ms=500)).get(tp0, []))
        assert got == [b"v-%d" % i for i in range(6, 10)]


async def test_delete_records_errors_per_partition(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic = unique_topic("delete-records-err")
    ok, past, missing = TopicPartition(topic, 0), TopicPartition(topic, 1), TopicPartition(topic, 7)
    unknown = TopicPartition(unique_topic("no-such-topic"), 0)
    async with Admin(bs) as admin:
        await admin.create_topic(topic, 2)
        await produce(bs, topic, 0, 3)
        await produce(bs, topic, 1, 3)
        out = await admin.delete_records({ok: 2, past: 4, missing: 0, unknown: 0})
        assert out[ok] == 2  # one bad partition does not hide what happened to the others
        assert isinstance(out[past], BrokerResponseError) and out[past].code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert isinstance(out[missing], UnknownTopicError) and isinstance(out[unknown], UnknownTopicError)
        assert await admin.delete_records({past: 3}) == {past: 3}  # the high watermark itself is allowed


async def test_describe_log_dirs_sizes_and_topic_filter(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    written, empty = unique_topic("logdirs-written"), unique_topic("logdirs-empty")
    async with Admin(bs) as admin:
        await admin.create_topic(written, 2)
        await admin.create_topic(empty, 1)
        await produce(bs, written, 1, 20)

        (d,) = await admin.describe_log_dirs([written])
        cluster = await admin.describe_cluster()
        assert d.broker_id == cluster.controller_id and d.error is None and d.path
        assert d.total_bytes >= d.usable_bytes > 0
        assert set(d.partition_sizes) == {TopicPartition(written, 0), TopicPartition(written, 1)}
        assert d.partition_sizes[TopicPartition(written, 1)] > 0
        assert d.partition_sizes[TopicPartition(written, 0)] == 0

        (everything,) = await admin.describe_log_dirs()
        assert everything.path == d.path
        assert {TopicPartition(written, 1), TopicPartition(empty, 0)} <= set(everything.partition_sizes)

        with pytest.raises(UnknownTopicError):
            await admin.describe_log_dirs([unique_topic("no-such-topic")])


async def test_describe_cluster(module_broker: BrokerProcess) -> None:
    async with Admin(module_broker.bootstrap) as admin:
        d = await admin.describe_cluster()
        (b,) = d.brokers
        assert (b.host, b.port) == (module_broker.host, module_broker.port)
        assert d.controller_id == b.node_id
        assert d.cluster_id  # the same id Metadata reports
        await admin.list_topics()
        assert d.cluster_id == admin._cluster.cluster_id


async def test_describe_cluster_without_the_api_falls_back_to_metadata(module_broker: BrokerProcess) -> None:
    async with Admin(module_broker.bootstrap) as admin:
        expected = await admin.describe_cluster()
        conn = await admin._cluster.any_connection()
        del conn.versions[DescribeClusterRequest.API_KEY]  # as a broker older than KIP-700 answers ApiVersions
        with pytest.raises(UnsupportedVersionError):
            conn.version_for(DescribeClusterRequest)
        assert await admin.describe_cluster() == expected


async def commit_offsets(bs: str, group: str, offsets: dict[TopicPartition, int]) -> None:
    async with Consumer(bs, group_id=group, enable_auto_commit=False) as c:
        c.assign(list(offsets))
        await c.commit(offsets)


async def test_delete_group_offsets(module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    topic, group = unique_topic("offset-delete"), unique_topic("group")
    tp0, tp1, missing = TopicPartition(topic, 0), TopicPartition(topic, 1), TopicPartition(topic, 9)
    async with Admin(bs) as admin:
        await admin.create_topic(topic, 2)
        await commit_offsets(bs, group, {tp0: 5, tp1: 7})

        out = await admin.delete_group_offsets(group, [tp0, missing])
        assert out[tp0] is None
        assert isinstance(out[missing], UnknownTopicError)
        assert set(out) == {tp0, missing}

    async with Consumer(bs, group_id=group, enable_auto_commit=False) as c:
        c.assign([tp0, tp1])
        assert await c.committed(tp0) is None
        assert await c.committed(tp1) == 7  # the partition not named keeps its offset


async def test_delete_group_offsets_of_an_unknown_group_raises(module_broker: BrokerProcess) -> None:
    topic = unique_topic("offset-delete-unknown")
    async with Admin(module_broker.bootstrap) as admin:
        await admin.create_topic(topic, 1)
        with pytest.raises(KafkaClientError) as raised:
            await admin.delete_group_offsets(unique_topic("no-such-group"), [TopicPartition(topic, 0)])
        assert raised.value.code == ErrorCode.GROUP_ID_NOT_FOUND
