"""Issue 14: replicated partitions across three real broker processes (RF 3, min.insync.replicas 2).

Followers copy their leader batch for batch; acks=all waits for the ISR; a SIGKILLed leader is
replaced from the ISR and no acknowledged write is lost or duplicated; a SIGKILLed follower comes
back, catches up and rejoins the ISR with a log equal to the leader's.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as Ctp
from helpers.cluster import Cluster
from helpers.cluster_metadata import (
    SHORT_SESSION,
    agreed,
    coordinator,
    create_with_configs,
    listed_everywhere,
    metadata,
    new_topic,
    voters_for,
)
from helpers.wait import wait_until

LAG_MS = "4000"


@pytest.fixture
def cluster(cluster_factory) -> Cluster:  # type: ignore[no-untyped-def]
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env={**SHORT_SESSION,
                                      "KETCH_REPLICA_LAG_TIME_MAX_MS": LAG_MS})
    listed_everywhere(c)
    return c


def log_bytes(c: Cluster, node: int, topic: str, partition: int) -> bytes:
    """A replica's whole log as stored: its segment files, in order."""
    d = Path(c[node].data_dir) / f"{topic}-{partition}"
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


def produce(bootstrap: str, topic: str, n: int, acked: list[bytes], errors: list[str], stop: threading.Event | None = None,
            partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": 60000, "log_level": 3})

    def done(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked.append(msg.value())
        else:
            errors.append(str(err))

    for i in range(n):
        if stop is not None and stop.is_set():
            break
        p.produce(topic, value=b"m-%06d" % i, partition=partition, on_delivery=done)
        p.poll(0)
        if i % 200 == 199:
            p.flush(60)
    p.flush(60)


def follow(bootstrap: str, topic: str, partitions: int, seen: list[bytes], stop: threading.Event) -> None:
    """A read_committed consumer polling every partition from the start until `stop`: the
    bundled client without a group, so that no `__consumer_offsets` comes to exist."""
    import asyncio

    from client import Consumer as OurConsumer
    from client import TopicPartition as OurTp

    async def run() -> None:
        async with OurConsumer(bootstrap, isolation_level="read_committed", auto_offset_reset="earliest") as c:
            c.assign([OurTp(topic, p) for p in range(partitions)])
            while not stop.is_set():
                for records in (await c.getmany(timeout_ms=200)).values():
                    seen.extend(r.value for r in records if r.value is not None)

    asyncio.run(run())


def read_all(bootstrap: str, topic: str, partition: int, expect: int, timeout: float = 60) -> list[bytes]:
    """Every committed record of the partition: read until the consumer's position reaches the last
    stable offset asked of the leader when the read began (read_committed ListOffsets), and at least
    `expect` records. Stopping after a quiet moment instead cut reads short under load -- a leader
    moved by a drain answered nothing for 1.5 s and the test reported 13,800 records "lost"."""
    import time
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest", "log_level": 3})
    out: list[bytes] = []
    tp = Ctp(topic, partition)
    try:
        deadline = time.monotonic() + timeout
        end = -1
        while end < 0 and time.monotonic() < deadline:
            try:
                end = c.get_watermark_offsets(tp, timeout=5, cached=False)[1]
            except KafkaException:
                continue  # no leader answering yet: asked again until the deadline
        assert end >= 0, f"no last stable offset for {topic}-{partition} within {timeout} s"
        c.assign([Ctp(topic, partition, 0)])

        def position() -> int:
            return int(c.position([tp])[0].offset)

        while time.monotonic() < deadline and (len(out) < expect or (end > 0 and position() < end)):
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(m.value())
    finally:
        c.close()
    return out


def test_followers_hold_the_leaders_batches_and_acks_all_waits_for_them(cluster: Cluster) -> None:
    c = cluster
    layout = new_topic(c, "copied", 3, 3, {"min.insync.replicas": "2"})
    assert all(sorted(p[3]) == [1, 2, 3] for p in layout.partitions)  # all in sync
    for partition in range(3):
        acked: list[bytes] = []
        errors: list[str] = []
        produce(c.bootstrap, "copied", 1000, acked, errors, partition=partition)
        assert not errors and len(acked) == 1000
    for partition in range(3):
        c.wait_until(lambda partition=partition: len({log_bytes(c, n, "copied", partition) for n in (1, 2, 3)}) == 1,
                     timeout=20, message=f"three identical replicas of copied-{partition}")
        assert len(log_bytes(c, 1, "copied", partition)) > 1000 * 10


def test_sigkill_of_a_leader_loses_no_acknowledged_write_and_duplicates_none(cluster: Cluster) -> None:
    c = cluster
    layout = new_topic(c, "failover", 1, 3, {"min.insync.replicas": "2"})
    leader = layout.partitions[0][1]
    acked: list[bytes] = []
    errors: list[str] = []
    stop = threading.Event()
    t = threading.Thread(target=produce, args=(c.bootstrap, "failover", 1_000_000, acked, errors, stop))
    t.start()
    survivors = [n for n in c.node_ids if n != leader]
    try:
        c.wait_until(lambda: len(acked) >= 1500, timeout=60, message="writes acknowledged before the kill")
        c.kill(leader)
        at_kill = len(acked)
        c.wait_until(lambda: (x := agreed(c, "failover", survivors)) is not None and x.partitions[0][1] in survivors,
                     timeout=30, message="a new leader from the ISR")
        c.wait_until(lambda: len(acked) >= at_kill + 1500, timeout=60,
                     message="writes acknowledged by the new leader")
    finally:
        stop.set()
        t.join(timeout=120)
    assert not t.is_alive()
    assert not errors, errors[:3]
    got = read_all(",".join(f"127.0.0.1:{c.ports[n]}" for n in survivors), "failover", 0, len(acked))
    assert len(got) == len(set(got)), "duplicates after the failover"
    assert set(acked) <= set(got), f"{len(set(acked) - set(got))} acknowledged records lost"


def test_a_killed_follower_catches_up_and_rejoins_the_isr_with_the_leaders_log(cluster: Cluster) -> None:
    c = cluster
    layout = new_topic(c, "rejoin", 1, 3, {"min.insync.replicas": "2"})
    leader = layout.partitions[0][1]
    follower = next(n for n in c.node_ids if n != leader)
    acked: list[bytes] = []
    errors: list[str] = []
    t = threading.Thread(target=produce, args=(c.bootstrap, "rejoin", 4000, acked, errors))
    t.start()
    try:
        c.wait_until(lambda: len(acked) >= 1000, timeout=60, message="writes before the follower's kill")
        c.kill(follower)
        others = [n for n in c.node_ids if n != follower]
        c.wait_until(lambda: (x := agreed(c, "rejoin", others)) is not None and follower not in x.partitions[0][3],
                     timeout=30, message="the dead follower out of the ISR")
        c.restart(follower, kill=False)
        t.join(timeout=120)
    finally:
        t.join(timeout=5)
    assert not errors and len(acked) == 4000
    c.wait_until(lambda: (x := agreed(c, "rejoin", [1, 2, 3])) is not None and sorted(x.partitions[0][3]) == [1, 2, 3],
                 timeout=30, message="the follower back in the ISR")
    c.wait_until(lambda: log_bytes(c, follower, "rejoin", 0) == log_bytes(c, leader, "rejoin", 0), timeout=20,
                 message="the follower's log equal to the leader's")


def test_a_broker_killed_and_restarted_at_once_keeps_its_logs(cluster: Cluster) -> None:
    """Restarted before the controller fences it, a broker replays its metadata log only up to
    what it knew committed, an image that may predate the topic. Its partition directories must
    survive until it has caught up (a sweep at start deleted them: it came back leading an empty
    log at the same leader epoch, and its followers truncated their copies to it)."""
    c = cluster
    layout = new_topic(c, "kept", 3, 3, {"min.insync.replicas": "2"})
    victim = layout.partitions[0][1]
    acked: list[bytes] = []
    errors: list[str] = []
    for part in range(3):
        produce(c.bootstrap, "kept", 200, acked, errors, partition=part)
    assert not errors and len(acked) == 600
    before = {part: log_bytes(c, victim, "kept", part) for part in range(3)}
    assert all(before.values())
    c.kill(victim)
    c[victim].start(timeout=60)
    c.wait_until(lambda: (x := agreed(c, "kept", [1, 2, 3])) is not None
                 and all(sorted(p[3]) == [1, 2, 3] for p in x.partitions),
                 timeout=30, message="the restarted broker back in every ISR")
    assert c[victim].log_text().count("removing the directory") == 0, c[victim].log_tail()
    for part in range(3):
        assert log_bytes(c, victim, "kept", part).startswith(before[part])
    got = [v for part in range(3) for v in read_all(c.bootstrap, "kept", part, 200)]
    assert sorted(got) == sorted(acked)


def test_a_leader_restarted_with_a_torn_log_tail_leads_nothing_until_caught_up(cluster: Cluster) -> None:
    """A crash tears the last batch off the leader's log and the broker is back before the session
    timeout (the chaos suite's `torn-write`, seed 15626983). It must not lead at its old epoch with
    the shorter log: its followers would truncate the acknowledged batch away to match it. Its
    registration moves its leaderships to in-sync replicas, and it leads nothing until that applies."""
    c = cluster
    layout = new_topic(c, "torn", 1, 3, {"min.insync.replicas": "2"})
    victim = layout.partitions[0][1]
    acked: list[bytes] = []
    errors: list[str] = []
    produce(c.bootstrap, "torn", 200, acked, errors, partition=0)
    assert not errors and len(acked) == 200
    c.kill(victim)
    seg = sorted((c[victim].data_dir / "torn-0").glob("*.log"))[-1]
    with seg.open("r+b") as f:  # the last batch cut short, as a crash mid-write leaves it
        f.truncate(seg.stat().st_size - 20)
    c[victim].start(timeout=60)
    c.wait_until(lambda: (x := agreed(c, "torn", [1, 2, 3])) is not None
                 and sorted(x.partitions[0][3]) == [1, 2, 3],
                 timeout=30, message="the restarted broker back in the ISR")
    assert "truncating torn or corrupt log tail" in c[victim].log_text(), c[victim].log_tail()
    got = read_all(c.bootstrap, "torn", 0, 200)
    assert sorted(got) == sorted(acked)


def poll_into(consumer: Consumer, out: list[bytes]) -> int:
    """One poll; what it brought joins `out`. How many `out` holds."""
    m = consumer.poll(0.5)
    if m is not None and not m.error():
        out.append(m.value())
    return len(out)


def test_the_coordinators_broker_killed_transactions_and_group_offsets_carry_on(cluster: Cluster) -> None:
    """SIGKILL of the broker coordinating a transactional id and a group (both made the same broker
    by choosing the keys): the internal partitions' new leaders load their state; the producer
    finishes more transactions, the group resumes from its committed offsets, and a read_committed
    reader sees every committed transaction's records exactly once and no aborted one."""
    c = cluster
    # the module's brokers were killed and restarted by the tests before: one may be fenced for a
    # moment on a loaded machine, which new_topic waits out
    new_topic(c, "moved", 1, 3, {"min.insync.replicas": "2"})
    tid = "mover"
    c.wait_until(lambda: coordinator(c.ports[1], tid, 1) > 0, timeout=30, message="a transaction coordinator")
    victim = coordinator(c.ports[1], tid, 1)
    group = next(g for g in (f"movers-{i}" for i in range(1000)) if coordinator(c.ports[1], g, 0) == victim)
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid, "log_level": 3,
                  "transaction.timeout.ms": 20000})
    p.init_transactions(30)
    committed: list[bytes] = []

    def txn(n: int, commit: bool) -> None:
        p.begin_transaction()
        values = [b"t%d-%d" % (n, i) for i in range(20)]
        for v in values:
            p.produce("moved", value=v, partition=0)
        if commit:
            p.commit_transaction(60)
            committed.extend(values)
        else:
            p.abort_transaction(60)

    for n in range(5):
        txn(n, commit=n != 2)
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest", "log_level": 3})
    consumer.assign([Ctp("moved", 0, 0)])
    first: list[bytes] = []
    c.wait_until(lambda: poll_into(consumer, first) >= 80, timeout=30, message="the first four transactions read")
    consumer.commit(asynchronous=False)
    consumer.close()

    c.kill(victim)
    for n in range(5, 10):
        txn(n, commit=n != 7)
    survivors = [n for n in c.node_ids if n != victim]
    assert coordinator(c.ports[survivors[0]], tid, 1) in survivors
    resumed = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False,
                        "isolation.level": "read_committed", "auto.offset.reset": "earliest", "log_level": 3})
    rest: list[bytes] = []
    try:
        resumed.subscribe(["moved"])
        c.wait_until(lambda: poll_into(resumed, rest) >= 80, timeout=60,
                     message="the last four committed transactions read by the resumed group")
    finally:
        resumed.close()
    assert sorted(first + rest) == sorted(committed), "the group resumed exactly after its committed offset"
    everything = read_all(",".join(f"127.0.0.1:{c.ports[n]}" for n in survivors), "moved", 0, len(committed))
    assert sorted(everything) == sorted(committed)


def test_with_two_brokers_down_acks_all_is_refused_and_the_topic_recovers(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """min.insync.replicas 2 and only the leader left: acks=all gets NOT_ENOUGH_REPLICAS (nothing
    acknowledged that one more crash could lose); acks=1 still writes; with the brokers back in
    the ISR acks=all works again and nothing acknowledged is missing. Five brokers, so that the
    metadata quorum keeps its majority with two of them down (with three, two down stops the
    controller, no ISR change can commit and acks=all times out instead — as in Kafka)."""
    from helpers.raw import Raw

    from protocol.errors import ErrorCode
    from protocol.messages.produce import (
        PartitionProduceData,
        ProduceRequest,
        ProduceResponse,
        TopicProduceData,
    )
    from protocol.records import Record, build_batch

    voters = voters_for(5)
    c: Cluster = cluster_factory(5, args_for=lambda c, n: ["--voters", voters],
                                 env={**SHORT_SESSION,
                                      "KETCH_REPLICA_LAG_TIME_MAX_MS": LAG_MS})
    listed_everywhere(c)
    assert create_with_configs(c.ports[1], "quorumless", 1, 3, {"min.insync.replicas": "2"}) == 0
    c.wait_until(lambda: agreed(c, "quorumless", c.node_ids), timeout=10, message="the topic everywhere")
    layout = agreed(c, "quorumless", c.node_ids)
    assert layout is not None
    leader = layout.partitions[0][1]

    def send(acks: int, value: bytes) -> int:
        raw = Raw(c.ports[leader])
        try:
            resp = raw.request(ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[TopicProduceData(
                name="quorumless", partition_data=[PartitionProduceData(
                    index=0, records=build_batch([Record(0, 0, None, value)]))])]), 9)
        finally:
            raw.close()
        assert isinstance(resp, ProduceResponse)
        return resp.responses[0].partition_responses[0].error_code

    assert send(-1, b"before") == 0
    others = [n for n in layout.partitions[0][2] if n != leader]  # the two followers
    for n in others:
        c.kill(n)
    # fenced after the session timeout, they leave the ISR: only the leader is in sync
    c.wait_until(lambda: send(-1, b"refused") == ErrorCode.NOT_ENOUGH_REPLICAS, timeout=30,
                 message="acks=all refused with the followers gone")
    assert send(1, b"acks-1") == 0
    for n in others:
        c.restart(n, kill=False)
    c.wait_until(lambda: send(-1, b"after") == 0, timeout=60, message="acks=all accepted again")
    got = read_all(f"127.0.0.1:{c.ports[leader]}", "quorumless", 0, 3)
    assert {b"before", b"acks-1", b"after"} <= set(got)


def test_a_returning_broker_gets_its_preferred_leaderships_back_through_elect_leaders(cluster: Cluster) -> None:
    """The preferred leader (first replica) is SIGKILLed: another in-sync replica leads; once it is
    back in the ISR, ElectLeaders — from confluent-kafka's admin client, forwarded to the
    controller — gives the partition back to it; `ketch topic elect-leaders` then finds nothing
    to do."""
    import json
    import subprocess
    import sys

    from confluent_kafka import ElectionType
    from confluent_kafka.admin import AdminClient
    from helpers import REPO_ROOT

    c = cluster
    layout = new_topic(c, "preferred", 1, 3, {"min.insync.replicas": "2"})
    preferred = layout.partitions[0][2][0]
    assert layout.partitions[0][1] == preferred
    c.kill(preferred)
    others = [n for n in c.node_ids if n != preferred]
    c.wait_until(lambda: (x := agreed(c, "preferred", others)) is not None and x.partitions[0][1] in others,
                 timeout=30, message="another replica leads")
    c.restart(preferred, kill=False)
    c.wait_until(lambda: (x := agreed(c, "preferred", [1, 2, 3])) is not None and preferred in x.partitions[0][3],
                 timeout=30, message="the preferred replica back in the ISR")
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{c.ports[others[0]]}", "log_level": 3})
    result = admin.elect_leaders(ElectionType.PREFERRED, [Ctp("preferred", 0)]).result(30)
    assert result[Ctp("preferred", 0)] is None  # no error: elected
    c.wait_until(lambda: (x := agreed(c, "preferred", [1, 2, 3])) is not None and x.partitions[0][1] == preferred,
                 timeout=10, message="the preferred replica leads again")
    out = subprocess.run([sys.executable, "-m", "broker", "topic", "elect-leaders", "preferred", "--json",
                          "--bootstrap", f"127.0.0.1:{c.ports[others[1]]}"], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [{"topic": "preferred", "partition": 0, "result": "ELECTION_NOT_NEEDED"}]


def test_the_coordinator_killed_after_prepare_commit_the_new_one_finishes_the_transaction(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """The broker coordinating a transaction SIGKILLs itself right after PrepareCommit reached
    `__transaction_state` (KETCH_TEST_CRASH_AT=after_prepare), before any marker: the partition's
    new leader loads the prepared transaction and sends its markers; every one of the three data
    partitions (led by three brokers) ends committed, and a read_committed reader sees each record
    once."""
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env={**SHORT_SESSION, "KETCH_REPLICA_LAG_TIME_MAX_MS": LAG_MS,
                                      "KETCH_TEST_CRASH_AT": "after_prepare"})
    listed_everywhere(c)
    assert create_with_configs(c.ports[1], "prepared", 3, 3, {"min.insync.replicas": "2"}) == 0
    c.wait_until(lambda: agreed(c, "prepared", [1, 2, 3]), timeout=10, message="the topic everywhere")
    layout = agreed(c, "prepared", [1, 2, 3])
    assert layout is not None and {p[1] for p in layout.partitions} == {1, 2, 3}
    tid = "prepared-then-killed"
    c.wait_until(lambda: coordinator(c.ports[1], tid, 1) > 0, timeout=30, message="a transaction coordinator")
    victim = coordinator(c.ports[1], tid, 1)
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid, "log_level": 3,
                  "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    p.begin_transaction()
    values = [b"v%d" % i for i in range(30)]
    for i, v in enumerate(values):
        p.produce("prepared", value=v, partition=i % 3)
    p.flush(30)
    try:
        p.commit_transaction(60)  # the coordinator dies inside; the client retries on the new one
    except Exception as e:  # noqa: BLE001 - a client may give up; the outcome is what the log says
        print("commit_transaction:", e)
    wait_until(lambda: not c[victim].is_running(), timeout=30, message="the coordinator killed itself")
    c.kill(victim)  # reaped: its death was the point
    survivors = [n for n in c.node_ids if n != victim]
    got: list[bytes] = []
    for part in range(3):
        got += read_all(",".join(f"127.0.0.1:{c.ports[n]}" for n in survivors), "prepared", part, 10)
    assert sorted(got) == sorted(values), "the prepared commit was completed on every partition"


def _ketch(c: Cluster, node: int, *args: str) -> str:
    import subprocess
    import sys

    from helpers import REPO_ROOT
    out = subprocess.run([sys.executable, "-m", "broker", *args, "--bootstrap", f"127.0.0.1:{c.ports[node]}"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_reassignment_under_load_then_drain_a_broker(cluster: Cluster, tmp_path: Path) -> None:
    """Every replica of a topic moved from brokers 1 and 2 to 3 and 2 while an idempotent acks=all
    producer and a read_committed consumer run: broker 1 ends with no replica (and no directory) of
    it, and the consumer saw every acknowledged write exactly once. Then broker 3 is drained: it
    ends with no replica at all. Read back with read_committed: nothing lost, nothing duplicated."""
    import json

    from helpers.raw import Raw

    from protocol.messages.create_topics import (
        CreatableReplicaAssignment,
        CreatableTopic,
        CreateTopicsRequest,
        CreateTopicsResponse,
    )

    c = cluster
    raw = Raw(c.ports[1])
    try:
        resp = raw.request(CreateTopicsRequest(topics=[CreatableTopic(
            name="moving", num_partitions=-1, replication_factor=-1,
            assignments=[CreatableReplicaAssignment(partition_index=i, broker_ids=[1, 2]) for i in range(2)])]), 7)
    finally:
        raw.close()
    assert isinstance(resp, CreateTopicsResponse) and resp.topics[0].error_code == 0
    c.wait_until(lambda: agreed(c, "moving", [1, 2, 3]), timeout=10, message="the topic everywhere")
    acked: list[bytes] = []
    errors: list[str] = []
    seen: list[bytes] = []
    stop, stop_reading = threading.Event(), threading.Event()
    t = threading.Thread(target=produce, args=(c.bootstrap, "moving", 1_000_000, acked, errors, stop))
    reader = threading.Thread(target=follow, args=(c.bootstrap, "moving", 2, seen, stop_reading))
    reader.start()
    t.start()
    try:
        c.wait_until(lambda: len(acked) >= 1000, timeout=60, message="writes before the move")
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "moving", "partition": i, "replicas": [3, 2]} for i in range(2)]}))
        started = json.loads(_ketch(c, 2, "topic", "reassign", "--plan", str(plan), "--json"))
        assert [r["result"] for r in started] == ["started", "started"]
        c.wait_until(lambda: (x := agreed(c, "moving", [1, 2, 3])) is not None
                     and all(p[2] == (3, 2) and sorted(p[3]) == [2, 3] for p in x.partitions)
                     and json.loads(_ketch(c, 1, "topic", "reassignments", "--json")) == [],
                     timeout=60, message="both partitions on brokers 3 and 2 only, no reassignment left")
        at_move = len(acked)
        c.wait_until(lambda: len(acked) >= at_move + 1000, timeout=60, message="writes after the move")
    finally:
        stop.set()
        t.join(timeout=120)
        try:
            c.wait_until(lambda: len(seen) >= len(acked), timeout=60, message="the reader to catch up")
        finally:
            stop_reading.set()
            reader.join(timeout=30)
    assert not errors, errors[:3]
    # The read_committed consumer that ran through the move saw every acknowledged write once.
    assert len(seen) == len(set(seen)) and sorted(seen) == sorted(acked)
    c.wait_until(lambda: not any((Path(c[1].data_dir) / f"moving-{i}").exists() for i in range(2)), timeout=10,
                 message="broker 1 deleted its old replicas")
    # drained before any consumer group exists: __consumer_offsets (3 replicas on 3 brokers) could
    # not leave broker 3, as in Kafka
    _ketch(c, 1, "cluster", "drain", "--broker", "3", "--json")
    c.wait_until(lambda: (m := metadata(c.ports[1], None)) is not None
                 and all(3 not in p[2] for layout in m[1].values() for p in layout.partitions)
                 and json.loads(_ketch(c, 1, "topic", "reassignments", "--json")) == [],
                 timeout=90, message="no replica left on broker 3")
    got: list[bytes] = []
    for i in range(2):
        got += read_all(c.bootstrap, "moving", i, 1)
    assert len(got) == len(set(got)), "duplicates after the moves"
    assert set(acked) <= set(got), f"{len(set(acked) - set(got))} acknowledged records lost"


def _scrape(port: int, name: str) -> float:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:  # noqa: S310 - our broker
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not exposed")


def test_a_replica_added_by_reassignment_copies_under_the_throttle(cluster_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """With follower_replication_throttled_rate set, the broker a reassignment adds a replica to
    fetches that partition within the quota (its throttle holds it back; the brokers that only
    follow as before are never held), and the reassignment still completes with an equal log."""
    import json

    from helpers.broker import free_port
    from helpers.raw import Raw

    from protocol.messages.create_topics import (
        CreatableReplicaAssignment,
        CreatableTopic,
        CreateTopicsRequest,
        CreateTopicsResponse,
    )

    voters = voters_for(3)
    c: Cluster = cluster_factory(3, start=False, args_for=lambda c, n: ["--voters", voters],
                                 env={**SHORT_SESSION, "KETCH_REPLICA_LAG_TIME_MAX_MS": LAG_MS,
                                      "KETCH_FOLLOWER_REPLICATION_THROTTLED_RATE": "100000"})
    metrics = {n: free_port() for n in c.node_ids}
    for n, port in metrics.items():
        c[n].env["KETCH_METRICS_LISTEN"] = f"127.0.0.1:{port}"
    c.start()
    listed_everywhere(c)
    raw = Raw(c.ports[1])
    try:
        resp = raw.request(CreateTopicsRequest(topics=[CreatableTopic(
            name="copying", num_partitions=-1, replication_factor=-1,
            assignments=[CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2])])]), 7)
    finally:
        raw.close()
    assert isinstance(resp, CreateTopicsResponse) and resp.topics[0].error_code == 0
    c.wait_until(lambda: agreed(c, "copying", [1, 2, 3]), timeout=10, message="the topic everywhere")
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 20, "log_level": 3})
    for i in range(500):
        p.produce("copying", b"%04d" % i + b"x" * 996, partition=0)
    assert p.flush(60) == 0
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "copying", "partition": 0,
                                                               "replicas": [1, 2, 3]}]}))
    assert [r["result"] for r in json.loads(_ketch(c, 1, "topic", "reassign", "--plan", str(plan), "--json"))] \
        == ["started"]
    c.wait_until(lambda: (x := agreed(c, "copying", [1, 2, 3])) is not None and x.partitions[0][2] == (1, 2, 3)
                 and sorted(x.partitions[0][3]) == [1, 2, 3]
                 and json.loads(_ketch(c, 1, "topic", "reassignments", "--json")) == [],
                 timeout=120, message="the new replica caught up and the reassignment done")
    # ~500 KB at 100 KB/s (one second's worth may go at once): the quota held the copy back.
    assert _scrape(metrics[3], "ketch_replication_throttled_seconds_total") > 0
    assert _scrape(metrics[3], "ketch_replication_fetched_bytes_total") >= 500_000
    assert _scrape(metrics[2], "ketch_replication_throttled_seconds_total") == 0
    c.wait_until(lambda: log_bytes(c, 3, "copying", 0) == log_bytes(c, 1, "copying", 0), timeout=20,
                 message="the new replica's log equal to the leader's")


def test_followers_fetch_through_incremental_sessions(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """Each follower opens a fetch session with each leader and then fetches incrementally; a
    topic created after the sessions opened is copied all the same (acks=all with min ISR 3
    needs both followers' fetches of it), and every leader keeps one session per follower."""
    from helpers.broker import free_port

    voters = voters_for(3)
    c: Cluster = cluster_factory(3, start=False, args_for=lambda c, n: ["--voters", voters],
                                 env={**SHORT_SESSION, "KETCH_REPLICA_LAG_TIME_MAX_MS": LAG_MS})
    metrics = {n: free_port() for n in c.node_ids}
    for n, port in metrics.items():
        c[n].env["KETCH_METRICS_LISTEN"] = f"127.0.0.1:{port}"
    c.start()
    listed_everywhere(c)
    assert create_with_configs(c.ports[1], "early", 3, 3, {}) == 0
    c.wait_until(lambda: agreed(c, "early", [1, 2, 3]), timeout=10, message="the first topic everywhere")
    c.wait_until(lambda: all(_scrape(metrics[n], 'ketch_replication_fetches_total{kind="incremental"}') > 0
                             for n in c.node_ids), timeout=20, message="every follower fetching incrementally")
    assert create_with_configs(c.ports[1], "late", 3, 3, {"min.insync.replicas": "3"}) == 0
    c.wait_until(lambda: agreed(c, "late", [1, 2, 3]), timeout=10, message="the second topic everywhere")
    for partition in range(3):
        acked: list[bytes] = []
        errors: list[str] = []
        produce(c.bootstrap, "late", 200, acked, errors, partition=partition)
        assert not errors and len(acked) == 200
    for partition in range(3):
        c.wait_until(lambda partition=partition: len({log_bytes(c, n, "late", partition) for n in (1, 2, 3)}) == 1,
                     timeout=20, message=f"three identical replicas of late-{partition}")
    layout = agreed(c, "late", [1, 2, 3])
    assert layout is not None
    leaders = {p[1] for p in layout.partitions}
    c.wait_until(lambda: all(_scrape(metrics[n], 'ketch_fetch_sessions{kind="follower"}') == 2 for n in leaders),
                 timeout=10, message="one session per follower on every leader")
