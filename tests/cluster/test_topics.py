"""Issue 13: topics and partitions as metadata records, across three real broker processes.

Every broker answers Metadata for the whole cluster from its image; a topic created through any
broker (forwarded to the active controller) appears on all of them with the same replicas and
leaders; produce goes to the leader the metadata names and is refused elsewhere; a fenced broker
leaves every leadership and gets it back when it returns; a topic created while the controller
is SIGKILLed exists everywhere whole, or nowhere.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from helpers.cluster import Cluster
from helpers.cluster_metadata import (
    SHORT_SESSION,
    Layout,
    agreed,
    create,
    listed_everywhere,
    metadata,
    voters_for,
)
from helpers.quorum_views import agreed_leader
from helpers.raw import Raw

from client import Admin
from client.admin_cli.cluster import cluster_describe
from protocol.errors import ErrorCode
from protocol.messages.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.records import Record, build_batch
from storage.faults import SLOW_MKDIR_ENV


async def describe(bootstrap: str) -> dict[str, Any]:
    async with Admin(bootstrap) as admin:
        return await cluster_describe(admin)


def produce(port: int, topic: str, partition: int) -> int:
    raw = Raw(port)
    try:
        resp = raw.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
            name=topic, partition_data=[PartitionProduceData(index=partition, records=build_batch([Record(0, 0, None, b"v")]))])]), 9)
    finally:
        raw.close()
    assert isinstance(resp, ProduceResponse)
    return resp.responses[0].partition_responses[0].error_code


def leader_of_quorum(c: Cluster) -> int:
    views: list[int] = []
    c.wait_until(lambda: views.append(v.leader) or True if (v := agreed_leader(c, c.running())) else False,
                 timeout=15, message="a quorum leader")
    return views[-1]


def test_a_topic_created_through_a_follower_is_the_same_on_every_broker(cluster: Cluster) -> None:
    c = cluster
    controller = leader_of_quorum(c)
    via = next(n for n in c.node_ids if n != controller)  # forwarded to the controller
    assert create(c.ports[via], "spread", 6, 3) == (0, None)
    layouts: list[Layout] = []
    c.wait_until(lambda: layouts.append(x) or True if (x := agreed(c, "spread", [1, 2, 3])) else False,
                 timeout=10, message="the same layout of `spread` on all three brokers")
    layout = layouts[-1]
    assert len(layout.partitions) == 6
    leaders = [p[1] for p in layout.partitions]
    assert set(leaders) == {1, 2, 3}  # striped: every broker leads some partitions
    for _err, leader, replicas, isr in layout.partitions:
        assert sorted(replicas) == [1, 2, 3] and replicas[0] == leader and sorted(isr) == [1, 2, 3]
    for i, leader in enumerate(leaders):
        assert produce(c.ports[leader], "spread", i) == 0
        other = next(n for n in (1, 2, 3) if n != leader)
        assert produce(c.ports[other], "spread", i) == ErrorCode.NOT_LEADER_OR_FOLLOWER

    code, message = create(c.ports[via], "too-many", 1, 4)
    assert code == ErrorCode.INVALID_REPLICATION_FACTOR and "only 3 broker(s)" in (message or "")
    assert create(c.ports[controller], "spread", 1, 1)[0] == ErrorCode.TOPIC_ALREADY_EXISTS


def test_create_topics_answers_once_each_new_leader_has_its_log_open(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """A broker lists a new partition at once, but its leader opens the log on its I/O thread and
    answers NOT_LEADER_OR_FOLLOWER until then; a client writing to the leader the moment
    CreateTopics answers must find it open. The topic is created through the broker holding no
    replica of it (nothing of its own to open), on disks where each new log's directory takes
    20 ms to make: the two leaders need more than a second for their 60 logs."""
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env={**SHORT_SESSION, SLOW_MKDIR_ENV: "20"})
    listed_everywhere(c)
    via, a, b = c.node_ids
    n = 60
    raw = Raw(c.ports[via])
    try:
        resp = raw.request(CreateTopicsRequest(timeout_ms=30_000, topics=[CreatableTopic(
            name="opened", num_partitions=-1, replication_factor=-1, assignments=[
                CreatableReplicaAssignment(partition_index=i, broker_ids=[a, b] if i % 2 else [b, a])
                for i in range(n)])]), 7)
    finally:
        raw.close()
    assert isinstance(resp, CreateTopicsResponse) and resp.topics[0].error_code == 0, resp
    last_opened_first = [(i, a if i % 2 else b) for i in reversed(range(n))]  # a partition's first replica leads
    assert {i: produce(c.ports[leader], "opened", i) for i, leader in last_opened_first} == dict.fromkeys(range(n), 0)


def test_a_fenced_broker_leaves_every_leadership_and_gets_it_back(cluster: Cluster) -> None:
    c = cluster
    assert create(c.ports[1], "fence-me", 6, 1)[0] == 0
    c.wait_until(lambda: agreed(c, "fence-me", [1, 2, 3]), timeout=10, message="the topic everywhere")
    controller = leader_of_quorum(c)
    victim = next(n for n in c.node_ids if n != controller)
    before = agreed(c, "fence-me", [1, 2, 3])
    assert before is not None
    led = [i for i, p in enumerate(before.partitions) if p[1] == victim]
    assert led, "the victim leads something"
    c.pause(victim)  # SIGSTOP: heartbeats stop, the controller fences it after the session timeout
    try:
        others = [n for n in c.node_ids if n != victim]

        def victim_leads_nothing() -> bool:
            x = agreed(c, "fence-me", others)
            return x is not None and victim not in x.brokers and all(x.partitions[i][1] == -1 for i in led)

        c.wait_until(victim_leads_nothing, timeout=20, message="the fenced broker leads nothing")
        now = agreed(c, "fence-me", others)
        assert now is not None
        # only its ISR could take over, and the ISR is only itself: leaderless, not unclean
        assert all(now.partitions[i][0] == ErrorCode.LEADER_NOT_AVAILABLE for i in led)
        assert all(now.partitions[i] == before.partitions[i] for i in range(6) if i not in led)
        described = asyncio.run(describe(f"127.0.0.1:{c.ports[others[0]]}"))
        flagged = {(r["topic"], r["partition"], r["problem"]) for r in described["partitions_needing_attention"]}
        assert {("fence-me", i, "no leader") for i in led} <= flagged
        assert {b["node"]: b["state"] for b in described["brokers"]}[victim] == "fenced"
    finally:
        c.resume(victim)
    c.wait_until(lambda: (x := agreed(c, "fence-me", [1, 2, 3])) is not None
                 and all(x.partitions[i][1] == victim for i in led),
                 timeout=20, message="the broker back, leading its partitions again")
    c.wait_until(lambda: produce(c.ports[victim], "fence-me", led[0]) == 0, timeout=10,
                 message="the returned leader takes writes")


def test_topics_created_while_the_controller_is_killed_exist_whole_everywhere_or_nowhere(cluster: Cluster) -> None:
    c = cluster
    controller = leader_of_quorum(c)
    via = next(n for n in c.node_ids if n != controller)
    answers: dict[str, int] = {}
    stop = threading.Event()

    def creator() -> None:
        """One topic after another, each retried as a client retries NOT_CONTROLLER and timeouts
        (an ambiguous answer may have created it: TOPIC_ALREADY_EXISTS then counts as created)."""
        for i in range(200):
            name = f"during-{i}"
            answers[name] = -1
            while not stop.is_set():
                try:
                    code = create(c.ports[via], name, 4, 1, timeout=5)[0]
                except (OSError, AssertionError):
                    code = -1
                if code in (0, ErrorCode.TOPIC_ALREADY_EXISTS):
                    answers[name] = 0
                    break
                stop.wait(0.1)  # retry backoff
            if stop.is_set():
                return

    t = threading.Thread(target=creator)
    t.start()
    try:
        c.wait_until(lambda: sum(code == 0 for code in answers.values()) >= 5, timeout=20,
                     message="some topics created before the kill")
        c.kill(controller)  # SIGKILL mid-stream
        c.wait_until(lambda: sum(code == 0 for code in answers.values()) >= 5 + 10, timeout=40,
                     message="topics created again under the new controller")
    finally:
        stop.set()
        t.join(timeout=30)
    c.restart(controller, kill=False)
    c.wait_until(lambda: all((m := metadata(c.ports[n], None)) and m[0] == (1, 2, 3) for n in (1, 2, 3)),
                 timeout=30, message="the killed broker back and registered")

    def same_everywhere() -> dict[str, Layout] | None:
        views = [metadata(c.ports[n], None) for n in (1, 2, 3)]
        if any(v is None for v in views):
            return None
        tops = [{k: v for k, v in m[1].items() if k.startswith("during-")} for m in views if m is not None]
        return tops[0] if all(t == tops[0] for t in tops) else None

    found: list[dict[str, Layout]] = []
    c.wait_until(lambda: found.append(x) or True if (x := same_everywhere()) is not None else False,
                 timeout=20, message="the same topics on all three brokers")
    topics = found[-1]
    for name, layout in topics.items():
        assert len(layout.partitions) == 4, f"{name} exists with {len(layout.partitions)} of its 4 partitions"
    acknowledged = {n for n, code in answers.items() if code == 0}
    assert acknowledged <= set(topics), f"acknowledged but missing: {sorted(acknowledged - set(topics))}"


def test_real_clients_list_three_brokers_and_the_leaders_the_metadata_names(cluster: Cluster) -> None:
    """confluent-kafka, aiokafka, kafka-python and kcat, each bootstrapped from one broker only."""
    import json
    import shutil
    import subprocess

    from aiokafka import AIOKafkaClient  # type: ignore[import-untyped]
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaConsumer  # type: ignore[import-untyped]

    c = cluster
    assert create(c.ports[1], "listed", 6, 2)[0] == 0
    c.wait_until(lambda: agreed(c, "listed", [1, 2, 3]), timeout=10, message="the topic everywhere")
    truth = agreed(c, "listed", [1, 2, 3])
    assert truth is not None
    leaders = {i: p[1] for i, p in enumerate(truth.partitions)}
    ports = {n: c.ports[n] for n in (1, 2, 3)}
    one = f"127.0.0.1:{c.ports[3]}"

    md = AdminClient({"bootstrap.servers": one}).list_topics(timeout=10)
    assert {b.id: b.port for b in md.brokers.values()} == ports
    assert {i: p.leader for i, p in md.topics["listed"].partitions.items()} == leaders
    assert all(sorted(p.replicas) == sorted(truth.partitions[i][2]) for i, p in md.topics["listed"].partitions.items())

    async def aiokafka_view() -> tuple[dict[int, int], dict[int, int]]:
        client = AIOKafkaClient(bootstrap_servers=one)
        await client.bootstrap()
        try:
            cm = await client.fetch_all_metadata()
            return ({b.nodeId: b.port for b in cm.brokers()},
                    {p: cm.leader_for_partition(_tp("listed", p)) for p in cm.partitions_for_topic("listed")})
        finally:
            await client.close()

    def _tp(topic: str, p: int):  # type: ignore[no-untyped-def]
        from aiokafka.structs import TopicPartition  # type: ignore[import-untyped]
        return TopicPartition(topic, p)

    assert asyncio.run(aiokafka_view()) == (ports, leaders)

    kc = KafkaConsumer(bootstrap_servers=one)
    try:
        kc.topics()  # fetches cluster metadata
        cm = kc._client.cluster
        assert {b.node_id: b.port for b in cm.brokers()} == ports
        from kafka import TopicPartition as KTP
        assert {p: cm.leader_for_partition(KTP("listed", p)) for p in cm.partitions_for_topic("listed")} == leaders
    finally:
        kc.close()

    exe = shutil.which("kcat")
    assert exe is not None, "kcat is not installed: `make system-deps` (apt-get install kcat)"
    out = json.loads(subprocess.run([exe, "-L", "-J", "-b", one, "-t", "listed"], capture_output=True, check=True,
                                    timeout=30).stdout)
    assert {b["id"]: int(b["name"].rsplit(":", 1)[1]) for b in out["brokers"]} == ports
    assert {p["partition"]: p["leader"] for p in out["topics"][0]["partitions"]} == leaders


def test_a_broker_stopped_with_sigterm_leaves_its_leaderships_before_it_exits(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """Controlled shutdown: with a session timeout far longer than the test, only the broker's own
    WantShutDown can have moved its leaderships away by the time its process has exited."""
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env={"KETCH_BROKER_SESSION_TIMEOUT_MS": "120000"})
    listed_everywhere(c)
    assert create(c.ports[1], "drain", 6, 1)[0] == 0
    c.wait_until(lambda: agreed(c, "drain", [1, 2, 3]), timeout=10, message="the topic everywhere")
    quorum_leader = leader_of_quorum(c)
    victim = next(n for n in c.node_ids if n != quorum_leader)
    before = agreed(c, "drain", [1, 2, 3])
    assert before is not None
    led = [i for i, p in enumerate(before.partitions) if p[1] == victim]
    assert led
    assert c[victim].stop() == 0  # SIGTERM, and it exits cleanly
    others = [n for n in c.node_ids if n != victim]
    # committed before it was let go; a survivor may apply it a moment later (never a fence: 120 s)
    c.wait_until(lambda: (x := agreed(c, "drain", others)) is not None and all(x.partitions[i][1] == -1 for i in led),
                 timeout=5, message="the stopped broker's partitions without it as leader on both survivors")
    after = agreed(c, "drain", others)
    assert after is not None
    assert all(after.partitions[i] == before.partitions[i] for i in range(6) if i not in led)


def test_a_transaction_and_a_consumer_group_across_three_brokers(cluster: Cluster) -> None:
    """confluent-kafka: the transaction coordinator, the group coordinator and the six data
    partitions' leaders spread over three brokers. A committed transaction is read by a
    read_committed consumer group, an aborted one is not; markers and the produce-time
    verification (AddPartitionsToTxn verify_only) cross brokers."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as Ctp

    c = cluster
    assert create(c.ports[1], "eos", 6, 1)[0] == 0
    c.wait_until(lambda: agreed(c, "eos", [1, 2, 3]), timeout=10, message="the topic everywhere")
    layout = agreed(c, "eos", [1, 2, 3])
    assert layout is not None and {p[1] for p in layout.partitions} == {1, 2, 3}
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "eos-cluster", "log_level": 3})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(60):
        p.produce("eos", key=b"k%d" % i, value=b"committed-%d" % i, partition=i % 6)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(12):
        p.produce("eos", value=b"aborted-%d" % i, partition=i % 6)
    p.flush(30)
    p.abort_transaction(30)

    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "eos-readers", "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 3})
    seen: list[bytes] = []
    try:
        consumer.subscribe(["eos"])

        def all_committed() -> bool:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                seen.append(m.value())
            return len(seen) >= 60

        c.wait_until(all_committed, timeout=60, message="the 60 committed records")
        consumer.commit(asynchronous=False)
        committed = consumer.committed([Ctp("eos", i) for i in range(6)], timeout=10)
    finally:
        consumer.close()
    assert sorted(seen) == sorted(b"committed-%d" % i for i in range(60))
    # the group's offsets were committed (to the group coordinator, wherever it is): all ten
    # committed records of each partition consumed
    assert all(tp.error is None and tp.offset >= 10 for tp in committed)


def test_auto_creation_racing_on_three_brokers_answers_only_retriable_errors(cluster: Cluster) -> None:
    """Clients bootstrapped from several brokers ask them all for a new topic at once: one
    auto-creation wins, the brokers that lost the race (the topic not yet in their image) answer
    LEADER_NOT_AVAILABLE — "being created", retried — never TOPIC_ALREADY_EXISTS, which kcat and
    librdkafka take as fatal for a produce."""
    from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse

    c = cluster
    names = [f"auto-race-{i}" for i in range(15)]
    codes: list[int] = []
    barrier = threading.Barrier(3)

    def ask(node: int) -> None:
        raw = Raw(c.ports[node])
        try:
            barrier.wait(10)
            for name in names:
                resp = raw.request(MetadataRequest(topics=[MetadataRequestTopic(name=name)],
                                                   allow_auto_topic_creation=True), 9)
                assert isinstance(resp, MetadataResponse)
                codes.append(resp.topics[0].error_code)
        finally:
            raw.close()

    threads = [threading.Thread(target=ask, args=(n,)) for n in c.node_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(codes) == 45
    assert set(codes) <= {0, ErrorCode.LEADER_NOT_AVAILABLE}, sorted(set(codes))
    c.wait_until(lambda: all(agreed(c, n, [1, 2, 3]) for n in names), timeout=15, message="every topic everywhere")
