"""The bundled client's Admin against a real Ketch broker: describe_producers, and abort_transaction
of a genuinely hanging transaction.

The transaction hangs the way it does in production: a transactional producer process with a long
transaction timeout is SIGKILLed in the middle of its transaction. Its records hold the partition's
last stable offset back, so read_committed consumers see nothing written after them, until an
operator finds the producer with describe_producers and writes the ABORT marker with
abort_transaction (what `kafka-transactions.sh abort` does).
"""

from __future__ import annotations

import asyncio
import sys

from helpers import REPO_ROOT, BrokerProcess, unique_topic

from client import Admin, Consumer, Producer, TopicPartition

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
