"""AlterReplicaLogDirs (34) on a real broker with two log directories: a replica moves while a
producer keeps writing to it, and nothing acknowledged is lost or doubled; a broker killed in the
middle of a move comes back with the replica whole."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from helpers import BrokerProcess, unique_topic, wait_until
from helpers.confluent import QUIET, consume_all, create_topic
from helpers.raw import Raw

from broker.log_dirs import FUTURE_MARKER
from protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopic,
)
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse

VALUE = b"x" * 1000


def alter(broker: BrokerProcess, topic: str, partition: int, path: Path) -> int:
    conn = Raw(broker.port)
    try:
        resp = conn.request(AlterReplicaLogDirsRequest(dirs=[AlterReplicaLogDir(path=str(path), topics=[
            AlterReplicaLogDirTopic(name=topic, partitions=[partition])])]), 2)
    finally:
        conn.close()
    assert isinstance(resp, AlterReplicaLogDirsResponse)
    ((result,),) = [t.partitions for t in resp.results]
    return result.error_code


def placement(broker: BrokerProcess, topic: str) -> dict[tuple[str, bool], int]:
    """(log dir, is future) -> partition index, as DescribeLogDirs reports them."""
    conn = Raw(broker.port)
    try:
        resp = conn.request(DescribeLogDirsRequest(topics=None), 4)
    finally:
        conn.close()
    assert isinstance(resp, DescribeLogDirsResponse)
    return {(r.log_dir, p.is_future_key): p.partition_index
            for r in resp.results for t in r.topics if t.name == topic for p in t.partitions}


def fill(bootstrap: str, topic: str, n: int, prefix: bytes = b"fill") -> list[bytes]:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET})
    values = [prefix + b"-%06d-" % i + VALUE for i in range(n)]
    for v in values:
        while True:
            try:
                p.produce(topic, value=v, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    return values


def test_a_replica_moves_to_the_other_dir_while_a_producer_writes_to_it(tmp_path: Path) -> None:
    a, b = tmp_path / "disk-a", tmp_path / "disk-b"
    broker = BrokerProcess(tmp_path / "data", env={"KETCH_LOG_DIRS": f"{a},{b}"}, log_path=tmp_path / "broker.log")
    try:
        broker.start()
        topic = unique_topic("move")
        create_topic(broker.bootstrap, topic, 1)
        assert placement(broker, topic) == {(str(a), False): 0}
        written = fill(broker.bootstrap, topic, 20_000)  # ~20 MB to copy while produce goes on

        sent: list[bytes] = []
        acked: list[bytes] = []
        errors: list[object] = []
        stop = threading.Event()

        def keep_producing() -> None:
            p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True,
                          "linger.ms": 2, **QUIET})

            def report(err: object, msg: object) -> None:
                if err is not None:
                    errors.append(err)
                else:
                    acked.append(msg.value())  # type: ignore[attr-defined]

            i = 0
            while not stop.is_set():
                v = b"live-%07d" % i
                try:
                    p.produce(topic, value=v, partition=0, on_delivery=report)
                except BufferError:
                    p.poll(0.01)
                    continue
                sent.append(v)
                i += 1
                p.poll(0)
                if i % 100 == 0:
                    time.sleep(0.001)
            p.flush(30)

        producer = threading.Thread(target=keep_producing, name="producer", daemon=True)
        producer.start()
        wait_until(lambda: len(acked) >= 500, timeout=30, message="the producer under way")
        before = len(acked)
        assert alter(broker, topic, 0, b) == 0
        seen_future = False

        def moved() -> bool:
            nonlocal seen_future
            where = placement(broker, topic)
            seen_future = seen_future or (str(b), True) in where
            return where == {(str(b), False): 0}

        wait_until(moved, timeout=60, interval=0.02, message="the replica in the other directory")
        during = len(acked)
        wait_until(lambda: len(acked) >= during + 500, timeout=30, message="more acks after the move")
        stop.set()
        producer.join(60)
        assert not producer.is_alive() and not errors, errors[:3]
        assert before < during, "the producer was not writing during the move"
        assert seen_future, "DescribeLogDirs never showed the future replica"
        assert acked == sent  # every one acknowledged, in the order sent

        values = [r.value for r in consume_all(broker.bootstrap, topic, 1, timeout=120)]
        assert values == written + sent  # nothing lost, nothing twice, in order
        assert (b / f"{topic}-0").is_dir() and not (b / f"{topic}-0" / FUTURE_MARKER).exists()
        wait_until(lambda: not any(p.name.startswith(f"{topic}-0") for p in a.iterdir()), timeout=10,
                   message="the old directory removed")
        # the moved replica is the one a restart opens
        broker.restart()
        assert placement(broker, topic) == {(str(b), False): 0}
        assert [r.value for r in consume_all(broker.bootstrap, topic, 1, timeout=120)] == written + sent
    finally:
        broker.close()


@pytest.mark.parametrize("point", ["move_copying", "move_swapping"])
def test_a_broker_killed_during_a_move_restarts_with_the_replica_whole(tmp_path: Path, point: str) -> None:
    """SIGKILLed while the future log is being copied: the original replica is intact and the
    move goes on from the copy (not from the start) once the broker is back, while producers
    write to the partition. Killed between retiring the old directory and taking the marker off
    the new one: the new one is the replica. Either way nothing acknowledged is lost, and the
    partition ends in one directory."""
    a, b = tmp_path / "disk-a", tmp_path / "disk-b"
    broker = BrokerProcess(tmp_path / "data", env={"KETCH_LOG_DIRS": f"{a},{b}", "KETCH_TEST_CRASH_AT": point},
                           log_path=tmp_path / "broker.log")
    try:
        broker.start()
        topic = unique_topic("move-kill")
        create_topic(broker.bootstrap, topic, 1)
        written = fill(broker.bootstrap, topic, 3_000)
        alter(broker, topic, 0, b)
        wait_until(lambda: not broker.is_running(), timeout=30, message=f"the broker to kill itself at {point}")
        broker.kill()  # reap it
        assert (b / f"{topic}-0" / FUTURE_MARKER).exists()  # the copy was under way
        assert (a / f"{topic}-0").is_dir() == (point == "move_copying")
        del broker.env["KETCH_TEST_CRASH_AT"]
        broker.start()
        written += fill(broker.bootstrap, topic, 500, b"later")  # acknowledged (acks=all) while the move goes on
        wait_until(lambda: placement(broker, topic) == {(str(b), False): 0}, timeout=60, interval=0.05,
                   message="the replica in the other directory")
        assert [r.value for r in consume_all(broker.bootstrap, topic, 1, timeout=60)] == written
        assert not (b / f"{topic}-0" / FUTURE_MARKER).exists()
        wait_until(lambda: not any(p.name.startswith(f"{topic}-0") for p in a.iterdir()), timeout=10,
                   message="nothing of the partition left in the first directory")
        resumed = [json.loads(line) for line in broker.log_text().splitlines()
                   if "replica move resumed" in line and line.startswith("{")]
        if point == "move_copying":
            assert len(resumed) == 1 and resumed[0]["from_offset"] > 0, resumed
        else:
            assert resumed == []
    finally:
        broker.close()
