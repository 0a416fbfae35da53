"""Durability across restarts: what the broker acknowledged with acks=all must survive SIGKILL.

The broker runs with KETCH_FLUSH_MESSAGES=1 (fsync after every batch), so an acknowledgement means the
data is on disk. The broker is killed with SIGKILL from another thread while a producer is streaming,
then restarted on the same data directory and port.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from confluent_kafka import KafkaError, Producer
from helpers import BrokerProcess, make_messages, unique_topic, wait_until
from helpers.confluent import QUIET, consume_all, create_topic, list_offsets, produce, topic_partition_count

PARTITIONS = 3
KILL_AFTER_ACKS = 3_000
DURABLE = {"KETCH_FLUSH_MESSAGES": "1"}


def _stream_until_killed(broker: BrokerProcess, topic: str) -> tuple[dict[int, list[bytes]], list, list]:
    """Produce round-robin to every partition; another thread SIGKILLs the broker after enough acks.

    Returns (values sent per partition in order, acks [(partition, offset, value)], failed values).
    """
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 5_000,  # after the kill, undelivered messages fail instead of waiting
            **QUIET,
        }
    )
    sent: dict[int, list[bytes]] = defaultdict(list)
    acks: list[tuple[int, int, bytes]] = []
    failed: list[tuple[bytes, KafkaError]] = []

    def on_delivery(err: KafkaError | None, msg) -> None:
        if err is None:
            acks.append((msg.partition(), msg.offset(), msg.value()))
        else:
            failed.append((msg.value(), err))

    killed = threading.Event()
    killer_error: list[BaseException] = []

    def killer() -> None:
        try:
            wait_until(lambda: len(acks) >= KILL_AFTER_ACKS, timeout=120, message=f"{KILL_AFTER_ACKS} acks")
            broker.kill()
        except BaseException as exc:  # reported by the main thread
            killer_error.append(exc)
        finally:
            killed.set()

    t = threading.Thread(target=killer, name="broker-killer", daemon=True)
    t.start()
    seq = 0
    after_kill = 0
    deadline = time.monotonic() + 150
    while after_kill < 200:  # keep producing through the kill, so the stream is cut mid-flight
        assert time.monotonic() < deadline, f"producing did not reach {KILL_AFTER_ACKS} acks in time"
        part = seq % PARTITIONS
        value = b"v%09d-" % seq + bytes([seq % 251]) * (seq % 97)
        try:
            p.produce(topic, value=value, partition=part, on_delivery=on_delivery)
        except BufferError:
            p.poll(0.01)
            continue
        sent[part].append(value)
        seq += 1
        if killed.is_set():
            after_kill += 1
        p.poll(0)
    t.join(30)
    assert not killer_error, f"killer thread failed: {killer_error[0]!r}"
    remaining = p.flush(60)  # every message is now either acknowledged or failed
    assert remaining == 0, f"{remaining} messages neither delivered nor failed"
    assert len(acks) + len(failed) == seq
    return sent, acks, failed


def test_acknowledged_messages_survive_sigkill(broker_factory) -> None:
    broker = broker_factory(env=DURABLE)
    topic = unique_topic("restart-kill")
    create_topic(broker.bootstrap, topic, PARTITIONS)

    sent, acks, failed = _stream_until_killed(broker, topic)
    assert len(acks) >= KILL_AFTER_ACKS
    assert failed, "the kill should have cut the stream with messages still in flight"
    assert not broker.is_running()

    broker.start()
    assert topic_partition_count(broker.bootstrap, topic) == PARTITIONS, "topic metadata lost in the crash"

    log = consume_all(
        broker.bootstrap, topic, PARTITIONS, {"isolation.level": "read_uncommitted"}, check_watermarks=False
    )
    by_part: dict[int, dict[int, bytes | None]] = defaultdict(dict)
    for r in log:
        assert r.offset not in by_part[r.partition], (
            f"offset {r.offset} of partition {r.partition} read twice"
        )
        by_part[r.partition][r.offset] = r.value

    # every acknowledged message is readable at the offset it was acknowledged with
    lost = [(p, o, v[:10]) for p, o, v in acks if by_part[p].get(o) != v]
    assert not lost, (
        f"{len(lost)} of {len(acks)} acknowledged messages lost or moved after SIGKILL + restart, e.g. "
        f"{lost[:5]}; ListOffsets (earliest, latest) now: {list_offsets(broker.bootstrap, topic, PARTITIONS)}"
    )

    end: dict[int, int] = {}
    for part in range(PARTITIONS):
        offsets = sorted(by_part[part])
        end[part] = len(offsets)
        assert offsets == list(range(len(offsets))), f"partition {part}: gap in offsets after recovery"
        # what survived is exactly a prefix of what was sent to that partition: nothing torn, reordered
        # or invented (unacknowledged messages may or may not have survived, but only as a prefix)
        values = [by_part[part][o] for o in offsets]
        assert values == sent[part][: len(values)], (
            f"partition {part}: recovered log is not a prefix of the stream"
        )
        acked_here = [o for p, o, _ in acks if p == part]
        assert len(values) >= max(acked_here, default=-1) + 1

    # new writes continue at the next offsets: no gap, no reuse
    fresh = make_messages(3 * PARTITIONS, seed=11)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", **QUIET})
    new_acks: dict[int, list[int]] = defaultdict(list)
    errors: list = []
    for i, m in enumerate(fresh):

        def cb(err, msg, part=i % PARTITIONS) -> None:
            if err is not None:
                errors.append(err)
            else:
                assert msg.partition() == part
                new_acks[part].append(msg.offset())

        p.produce(topic, value=m.value, partition=i % PARTITIONS, on_delivery=cb)
    assert p.flush(30) == 0 and not errors, f"produce after restart failed: {errors}"
    for part in range(PARTITIONS):
        assert new_acks[part] == [end[part], end[part] + 1, end[part] + 2], (
            f"partition {part}: recovered log ends at {end[part]} but new writes got offsets {new_acks[part]}"
        )
    after = consume_all(
        broker.bootstrap, topic, PARTITIONS, {"isolation.level": "read_uncommitted"}, check_watermarks=False
    )
    assert len(after) == len(log) + len(fresh)
    newest = {(r.partition, r.offset): r.value for r in after}
    for i, m in enumerate(fresh):
        part = i % PARTITIONS
        assert newest[(part, end[part] + i // PARTITIONS)] == m.value


def test_high_watermark_restored_after_sigkill(broker_factory) -> None:
    """After an unclean restart, a single-replica partition's high watermark is its recovered log end.

    Otherwise acknowledged data sits on disk but is invisible to consumers and ListOffsets.
    """
    broker = broker_factory(env=DURABLE)
    topic = unique_topic("restart-hw")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    msgs = make_messages(600, seed=41)
    acks = produce(broker.bootstrap, topic, msgs)
    expected = {p: (0, 1 + max(o for q, o in acks.values() if q == p)) for p in range(PARTITIONS)}
    assert list_offsets(broker.bootstrap, topic, PARTITIONS) == expected
    broker.restart(kill=True)
    assert list_offsets(broker.bootstrap, topic, PARTITIONS) == expected, "latest offsets after SIGKILL"
    assert list_offsets(broker.bootstrap, topic, PARTITIONS, "read_committed") == expected


def test_clean_restart_preserves_everything(broker_factory) -> None:
    """SIGTERM then restart: all data and topics are there, nothing more, nothing less."""
    broker = broker_factory()
    topic = unique_topic("restart-clean")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    msgs = make_messages(2_000, seed=21)
    acks = produce(broker.bootstrap, topic, msgs, {"enable.idempotence": True})
    port, data = broker.port, broker.data_dir
    broker.restart()
    assert (broker.port, broker.data_dir) == (port, data)
    assert topic_partition_count(broker.bootstrap, topic) == PARTITIONS
    got = {(r.partition, r.offset): r.value for r in consume_all(broker.bootstrap, topic, PARTITIONS)}
    assert got == {acks[m.idx]: m.value for m in msgs}


def test_repeated_kills_during_recovery_lose_nothing(broker_factory) -> None:
    """A broker killed again right after it starts listening must still recover the same log."""
    broker = broker_factory(env=DURABLE)
    topic = unique_topic("restart-twice")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    msgs = make_messages(1_500, seed=31)
    acks = produce(broker.bootstrap, topic, msgs)
    for _ in range(3):
        broker.restart(kill=True)
    got = {(r.partition, r.offset): r.value for r in consume_all(broker.bootstrap, topic, PARTITIONS)}
    assert got == {acks[m.idx]: m.value for m in msgs}
